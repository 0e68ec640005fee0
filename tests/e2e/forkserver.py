"""A fork server for ``ostinato serve``: imports ostinato once, then forks a fresh
process per start that runs the real command (``ostinato.cli.main.main(argv)``) with its
own environment, log file and event loop.

Why: importing ostinato and its dependencies takes seconds of CPU, and the crash test
starts the server dozens of times. A forked child is still a server process of its own,
killed with SIGKILL like any other; only the imports are done before the fork.

Protocol, one JSON object per line: the test writes ``{"argv": [...], "env": {...},
"log": "path", "cwd": "path"}`` on stdin and reads the child's pid back on stdout.
Children are reaped by the kernel (SIGCHLD ignored here, reset in the child). Runs as a
script: ``python tests/e2e/forkserver.py``; it ends when its stdin closes.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import sys
import traceback

WARM = (
    "ostinato.cli.main",
    "ostinato.cli.serve",
    "ostinato.server",
    "ostinato.store",
    "ostinato.store.sql.sqlite",
    "ostinato.store.sql.postgres",
    "ostinato.models.openai_chat",
    "ostinato.models.anthropic",
    "ostinato.models.openai_responses",
    "ostinato.models.offline",
    "uvicorn",
    "uvicorn.protocols.http.h11_impl",
    "uvicorn.protocols.http.httptools_impl",
    "uvicorn.protocols.websockets.websockets_impl",
    "uvicorn.lifespan.on",
    "aiosqlite",
    "asyncpg",
    "alembic.command",
)


def _child(request: dict[str, object]) -> None:
    """In the forked process: become ``ostinato serve``; never returns."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the server waits for its children
        log = os.open(str(request["log"]), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        os.chdir(str(request["cwd"]))
        env = request["env"]
        assert isinstance(env, dict)
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in env.items()})
        argv = request["argv"]
        assert isinstance(argv, list)
        sys.argv = ["ostinato", *map(str, argv)]
        from ostinato.cli.main import main

        code = main([str(a) for a in argv])
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve_forks() -> None:
    for name in WARM:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    print("ready", flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        print(pid, flush=True)


if __name__ == "__main__":
    serve_forks()
