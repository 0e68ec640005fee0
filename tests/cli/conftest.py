"""A live server for the CLI tests: the app under uvicorn in a thread, on a free port."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn

from ostinato.identity.keys import create_key
from ostinato.identity.settings import AuthSettings
from ostinato.models.scripted import ScriptedModel
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.memory import MemoryStore
from ostinato.tools.builtins import default_registry
from ostinato.tools.forge import Sandbox
from ostinato.tools.forge.tools import forge_tools, forged_source
from ostinato.tools.mounting import Mount, Source


@dataclass
class LiveServer:
    url: str
    runtime: Runtime
    model: ScriptedModel
    key: str | None = None  # ann's API key, on a server in auth mode keys


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[LiveServer]:
    yield from serving(tmp_path / "data")


@pytest.fixture
def keyed_server(tmp_path: Path) -> Iterator[LiveServer]:
    """A live server in auth mode ``keys``."""
    yield from serving(tmp_path / "keyed", AuthSettings(mode="keys", key_cache_s=0))


@pytest.fixture
def forging_server(tmp_path: Path) -> Iterator[LiveServer]:
    """A live server whose agent can forge tools (``create_tool``, in the sandbox)."""
    yield from serving(tmp_path / "forging", forge=True)


def serving(
    data_dir: Path, auth: AuthSettings | None = None, *, forge: bool = False
) -> Iterator[LiveServer]:
    model = ScriptedModel()
    store, sandbox = MemoryStore(), Sandbox()
    mount = None
    if forge:
        tools = [*default_registry(), *forge_tools(store, sandbox)]
        mount = Mount([Source("builtins", tools, builtin=True), forged_source(store, sandbox)])
    runtime = Runtime(store, model=model, data_dir=data_dir, mount=mount, sandbox=sandbox)
    key = asyncio.run(create_key(runtime.store, "ann", "cli"))[1] if auth else None
    app = create_app(runtime, model_name=model.name, store_name="memory://", auth=auth)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical", log_config=None)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.005)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield LiveServer(f"http://127.0.0.1:{port}", runtime, model, key)
    server.should_exit = True
    thread.join(timeout=10)
