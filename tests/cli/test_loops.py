"""``server.loop``: the event loop ``ostinato serve`` runs on (``server.loops``), chosen
before the loop is made and reported by ``/healthz``."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from ostinato.cli.main import main
from ostinato.server.loops import LoopUnavailable, loop_factory, loop_name
from tests.serve_script import run_serve_script

uvloop: ModuleType | None
try:
    import uvloop
except ImportError:  # pragma: no cover - installed with uvicorn[standard] where it builds
    uvloop = None

needs_uvloop = pytest.mark.skipif(uvloop is None, reason="uvloop is not installed here")


def test_asyncio_is_pythons_own_loop() -> None:
    assert loop_factory("asyncio") is None


@needs_uvloop
def test_auto_and_uvloop_make_uvloops_loop() -> None:
    for choice in ("auto", "uvloop"):
        factory = loop_factory(choice)  # type: ignore[arg-type]
        assert factory is not None
        loop = factory()
        try:
            assert loop_name(loop) == "uvloop"
        finally:
            loop.close()


def test_without_uvloop_auto_is_asyncio_and_uvloop_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "uvloop" else real(name)
    )
    assert loop_factory("auto") is None
    with pytest.raises(LoopUnavailable, match="uvloop is not installed"):
        loop_factory("uvloop")


def test_serve_refuses_a_loop_it_does_not_have(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "uvloop" else real(name)
    )
    monkeypatch.setenv("OSTINATO_SERVER__LOOP", "uvloop")
    assert main(["serve", "--port", "1", "--database-url", "memory://"]) == 2
    assert "server.loop is 'uvloop' but uvloop is not installed" in capsys.readouterr().err


def test_an_unknown_loop_is_a_settings_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OSTINATO_SERVER__LOOP", "trio")
    assert main(["serve", "--port", "1", "--database-url", "memory://"]) == 2
    assert "server.loop" in capsys.readouterr().err


def test_loop_name_of_asyncios_loop() -> None:
    loop = asyncio.new_event_loop()
    try:
        assert loop_name(loop) == "asyncio"
    finally:
        loop.close()


HEALTH_SERVE = """
import json, os, signal, sys, threading, time, urllib.request
from ostinato.cli.main import main
port = sys.argv[1]
os.environ.update(pair.split("=", 1) for pair in sys.argv[2:])
def watch():
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as got:
                print(json.dumps(json.loads(got.read())["load"]), flush=True)
            break
        except Exception:
            time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)
threading.Thread(target=watch, daemon=True).start()
sys.exit(main(["serve", "--port", port, "--database-url", "memory://"]))
"""


def _served_loop(tmp_path: Path, *env: str) -> str:
    done = run_serve_script(HEALTH_SERVE, *env, cwd=tmp_path)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stdout + done.stderr
    assert done.returncode in (0, -15), done.stderr
    return str(json.loads(lines[-1])["loop"])


@needs_uvloop
def test_a_started_server_runs_on_uvloop_by_default(tmp_path: Path) -> None:
    assert _served_loop(tmp_path) == "uvloop"


def test_a_started_server_runs_on_asyncio_when_told(tmp_path: Path) -> None:
    assert _served_loop(tmp_path, "OSTINATO_SERVER__LOOP=asyncio") == "asyncio"
