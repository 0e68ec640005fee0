"""A route's request handling is built once the server listens (``build_routes``, one
router at a time), not at the first request that reaches it (FastAPI's default for
included routers); the MCP SDK that ``/mcp`` serves with is imported then too, in a
thread (``prepare``). Counted by watching FastAPI build a route's state and by the
modules loaded: times are never asserted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import routing

from ostinato.models.scripted import ScriptedModel
from ostinato.runtime import Runtime
from ostinato.server import build_routes, create_app
from ostinato.store.memory import MemoryStore
from tests.serve_script import run_serve_script

# Routes included late (app.py's order), each the first of its router to be asked here.
LATE = ["/langgraph/info", "/.well-known/agent-card.json", "/metrics", "/v1/tools"]


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The paths whose state FastAPI builds from here on."""
    built: list[str] = []
    context = routing._EffectiveRouteContext
    original = context.from_api_route.__func__  # type: ignore[attr-defined]

    def counted(cls: type, /, **kwargs: Any) -> Any:
        built.append(kwargs["original_route"].path)
        return original(cls, **kwargs)

    monkeypatch.setattr(context, "from_api_route", classmethod(counted))
    yield built


def _app() -> Any:
    return create_app(Runtime(MemoryStore(), model=ScriptedModel(), seed_recall=False))


async def _ask_late_routes(app: Any) -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        for path in LATE:
            assert (await client.get(path)).status_code < 500


async def test_without_it_the_first_request_builds_the_routes(builds: list[str]) -> None:
    await _ask_late_routes(_app())
    assert len(builds) > 50  # what the watch sees: every route before the matched one


async def test_after_it_no_request_builds_a_route(builds: list[str]) -> None:
    app = _app()
    assert await build_routes(app) > 100
    built_before = len(builds)
    assert built_before > 100
    await _ask_late_routes(app)
    assert builds[built_before:] == []


WATCH = """
import json, os, signal, sys, threading, urllib.request
from fastapi import routing
import ostinato.cli.serve as serve
from ostinato.cli.main import main
port, late = sys.argv[1], json.loads(sys.argv[2])
built_all = threading.Event()
prepare = serve.prepare
async def watched(app):
    await prepare(app)
    built_all.set()
serve.prepare = watched
def watch():
    if not built_all.wait(60):
        print("built never", flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    built = []
    context = routing._EffectiveRouteContext
    original = context.from_api_route.__func__
    def counted(cls, **kwargs):
        built.append(kwargs["original_route"].path)
        return original(cls, **kwargs)
    context.from_api_route = classmethod(counted)
    for path in late:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30)
        except urllib.error.HTTPError:
            pass
    print("mcp " + json.dumps("mcp.server" in sys.modules), flush=True)
    print("built " + json.dumps(built), flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
threading.Thread(target=watch, daemon=True).start()
sys.exit(main(["serve", "--port", port, "--database-url", "memory://"]))
"""


def test_serve_builds_every_route_once_it_listens(tmp_path: Path) -> None:
    done = run_serve_script(WATCH, json.dumps(LATE), cwd=tmp_path)
    lines = [line for line in done.stdout.splitlines() if line.startswith("built ")]
    assert lines, done.stdout + done.stderr
    assert lines[-1] != "built never", "serve never built its routes"
    assert json.loads(lines[-1].removeprefix("built ")) == []
    assert "mcp true" in done.stdout.splitlines()  # the MCP SDK, loaded in a thread
