"""A live server for the CLI tests: the app under uvicorn in a thread, on a free port."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import uvicorn

from ostinato.models.scripted import ScriptedModel
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.memory import MemoryStore


@dataclass
class LiveServer:
    url: str
    runtime: Runtime
    model: ScriptedModel


@pytest.fixture
def live_server() -> Iterator[LiveServer]:
    model = ScriptedModel()
    runtime = Runtime(MemoryStore(), model=model)
    app = create_app(runtime, model_name=model.name, store_name="memory://")
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical", log_config=None)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.005)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield LiveServer(f"http://127.0.0.1:{port}", runtime, model)
    server.should_exit = True
    thread.join(timeout=10)
