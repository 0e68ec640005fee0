"""Start-up time: each measured in a fresh process, several times; prints min / median.

- ``ostinato --version``: the console script, end to end;
- ``import ostinato.server``: a Python process that imports the server package;
- ``ostinato serve`` ready: from starting the process until ``GET /healthz`` answers 200,
  with the offline model, a fresh SQLite file and no configuration file;
- ``ostinato serve`` restarted: the same on a file an earlier start made (a restart: the
  schema is at head, so Alembic is not loaded). No target of its own; the issue's is 1.5 s.

Targets (issue 9): under 0.3 s, 0.6 s and 1.5 s. The machine is shared: quote medians,
and look at the load average printed first.

Run:  python bench/startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

PYTHON = sys.executable
OSTINATO = shutil.which("ostinato", path=str(Path(PYTHON).parent)) or "ostinato"
TARGETS = {
    "ostinato --version": 0.3,
    "import ostinato.server": 0.6,
    "ostinato serve ready": 1.5,
    "ostinato serve restarted": 1.5,
}
# Variables that would make serve pick another model, store or config than the offline one.
CLEARED = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OSTINATO_BASE_URL")


def clean_env() -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("OSTINATO_") and k not in CLEARED
    }
    env["OSTINATO_MODEL"] = "offline:ostinato"
    # The warm-up writes the .pyc files a user's first run leaves behind; with this set
    # (as some shells and CI runners do) every run compiled each changed module again.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def timed_run(argv: list[str], cwd: str) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=clean_env(), check=True, capture_output=True)
    return time.perf_counter() - started


def serve_ready(cwd: str, database: Path | None = None) -> float:
    """Seconds until a new ``serve`` answers; on a new file unless ``database`` is given."""
    port = free_port()
    database = database or Path(cwd) / f"bench-{port}.db"
    argv = [OSTINATO, "serve", "--port", str(port), "--database-url", f"sqlite:///{database}"]
    started = time.perf_counter()
    process = subprocess.Popen(
        argv, cwd=cwd, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        with httpx.Client(timeout=1.0) as client:
            while time.perf_counter() - started < 60:
                if process.poll() is not None:
                    raise RuntimeError(f"serve exited with {process.returncode}")
                try:
                    if client.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                        return time.perf_counter() - started
                except httpx.TransportError:
                    pass
                time.sleep(0.005)
        raise RuntimeError("serve did not answer /healthz within 60 s")
    finally:
        process.terminate()
        process.wait(timeout=30)


def measure(name: str, run: Callable[[], float], runs: int) -> None:
    run()  # warm-up: the page cache, .pyc files
    times = sorted(run() for _ in range(runs))
    median = statistics.median(times)
    verdict = "meets" if median < TARGETS[name] else "MISSES"
    print(
        f"{name:<24} min {times[0]:.3f} s  median {median:.3f} s  max {times[-1]:.3f} s"
        f"  ({verdict} the {TARGETS[name]:g} s target)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each (default 7)")
    args = parser.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.runs} runs each")
    with tempfile.TemporaryDirectory() as cwd:
        measure("ostinato --version", lambda: timed_run([OSTINATO, "--version"], cwd), args.runs)
        code = [PYTHON, "-c", "import ostinato.server"]
        measure("import ostinato.server", lambda: timed_run(code, cwd), args.runs)
        measure("ostinato serve ready", lambda: serve_ready(cwd), args.runs)
        kept = Path(cwd) / "kept.db"
        measure("ostinato serve restarted", lambda: serve_ready(cwd, kept), args.runs)


if __name__ == "__main__":
    main()
