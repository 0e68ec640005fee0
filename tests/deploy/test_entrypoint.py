"""The container's entrypoint script (deploy/entrypoint.sh), run as the image runs it but
on this machine: with the package's commands on PATH, no container engine needed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.e2e.server import free_port

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "deploy" / "entrypoint.sh"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OSTINATO_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["OSTINATO_DATA_DIR"] = str(tmp_path / "data")
    env["OLLAMA_BASE_URL"] = "http://127.0.0.1:9/v1"  # no local model server: offline model
    return {**env, **extra}


def test_migrate_brings_a_new_database_to_the_schema_and_exits(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ostinato.db'}"
    run = subprocess.run(
        ["sh", str(ENTRYPOINT), "migrate"],
        env=_env(tmp_path, OSTINATO_DATABASE_URL=url),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "is at revision" in run.stdout
    assert (tmp_path / "ostinato.db").is_file()


def test_another_command_is_run_as_it_is(tmp_path: Path) -> None:
    run = subprocess.run(
        ["sh", str(ENTRYPOINT), "ostinato", "--version"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0 and run.stdout.startswith("ostinato ")


def test_with_no_arguments_it_serves_and_sigterm_stops_it_cleanly(tmp_path: Path) -> None:
    port = free_port()
    env = _env(
        tmp_path,
        OSTINATO_DATABASE_URL=f"sqlite:///{tmp_path / 'ostinato.db'}",
        OSTINATO_SERVER__PORT=str(port),
    )
    log = (tmp_path / "serve.log").open("wb")
    process = subprocess.Popen(["sh", str(ENTRYPOINT)], env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 120
        live = None
        while time.monotonic() < deadline and process.poll() is None:
            try:
                live = httpx.get(f"http://127.0.0.1:{port}/livez", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert live is not None, (tmp_path / "serve.log").read_text()
        assert live.json() == {"status": "alive", "draining": False}
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
        # exec: the shell became the server, so the signal reaches ostinato itself
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
        text = (tmp_path / "serve.log").read_text()
        # uvicorn ends a graceful shutdown by re-raising the signal it caught
        assert code in (0, -signal.SIGTERM), text
        assert "Application shutdown complete" in text
    finally:
        if process.poll() is None:
            process.kill()
        log.close()


def test_migrate_refuses_a_url_it_cannot_use(tmp_path: Path) -> None:
    run = subprocess.run(
        ["sh", str(ENTRYPOINT), "migrate", "--database-url", "mysql://db/x"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 2 and "unsupported store URL" in run.stderr
