"""The sandbox's worker process: ``python -I .../forge/worker.py``.

It is started in isolated mode with an empty environment and imports only the standard
library and the engine (``engine.py``, loaded from beside this file, not through the
ostinato package). It lowers its own resource limits (no core files, no files written,
an address-space cap behind the engine's memory limit, and a CPU limit a little above
each run's behind the engine's), then serves runs one at a time, in JSON lines on stdin
and stdout:

- in: ``{"run": {"code", "args", "limits", "network"}}``, and ``{"answers": [...]}`` to
  the requests it made;
- out: ``{"requests": [...]}`` while the code waits on ``fetch``, then
  ``{"done": {"ok": true, "json": ...}}`` or ``{"done": {"ok": false, "error", "limit"}}``.

It exits when stdin closes (the server went away).
"""

from __future__ import annotations

import importlib.util
import io
import json
import resource
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import IO, Any

ADDRESS_SPACE = 2 * 1024 * 1024 * 1024  # bytes: far above what a run may allocate


def _harden() -> None:
    for limit, value in (
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_FSIZE, 0),
        (resource.RLIMIT_AS, ADDRESS_SPACE),
    ):
        resource.setrlimit(limit, (value, value))


def _cpu_backstop(cpu_s: float) -> None:
    """Let the kernel end this process if the engine ever failed to stop the code."""
    soft = int(time.process_time() + cpu_s) + 3
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _engine() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "ostinato_sandbox_engine", Path(__file__).with_name("engine.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _send(out: IO[str], message: dict[str, Any]) -> None:
    out.write(json.dumps(message, ensure_ascii=False) + "\n")
    out.flush()


def serve(inp: IO[str], out: IO[str]) -> None:
    engine = _engine()

    def host(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        _send(out, {"requests": requests})
        line = inp.readline()
        if not line:
            raise SystemExit(0)
        answers: list[dict[str, Any]] = json.loads(line).get("answers", [])
        return answers

    for line in inp:
        job = json.loads(line)["run"]
        _cpu_backstop(job["limits"]["cpu_s"])
        try:
            value = engine.run(
                job["code"], job["args"], job["limits"], host, network=bool(job["network"])
            )
        except engine.RunFailed as exc:
            _send(out, {"done": {"ok": False, "error": exc.message, "limit": exc.limit}})
        else:
            _send(out, {"done": {"ok": True, "json": value}})


def main() -> None:
    _harden()
    inp = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8")
    out = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8")
    serve(inp, out)


if __name__ == "__main__":
    main()
