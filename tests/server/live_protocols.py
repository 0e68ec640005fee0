"""A live server for the protocol tests (A2A, AG-UI, MCP): the app under uvicorn in a
thread of its own, on SQLite (a file) or PostgreSQL, in auth mode ``keys`` with a key for
ann and one for bob. The store is opened in the server's own loop (its connections
belong to it). The model is a ``ScriptedModel`` the test fills, except that a message
containing ``gated`` streams ``part one. `` and then waits for the test's ``gate``
before ``part two.``: a turn that is certainly working while the test acts."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa
import uvicorn
from fastapi import FastAPI

from ostinato.identity.keys import create_key
from ostinato.identity.settings import AuthSettings
from ostinato.models.base import ModelEvent, ModelRequest, Stop, TextDelta, Usage
from ostinato.models.scripted import ScriptedModel
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store import PostgresStore, SQLiteStore, Store
from tests.store.conftest import open_postgres


class GateModel:
    """The scripted model, but a message containing ``gated`` waits for ``gate``."""

    name = "scripted:model"

    def __init__(self, scripted: ScriptedModel) -> None:
        self.scripted = scripted
        self.gate = threading.Event()

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        users = [m for m in request.messages if m.role == "user"]
        if users and "gated" in users[-1].text and request.messages[-1].role == "user":
            yield TextDelta("part one. ")
            await asyncio.to_thread(self.gate.wait, 30)
            yield TextDelta("part two.")
            yield Usage(1, 1)
            yield Stop("end_turn")
            return
        async for event in self.scripted.stream(request):
            yield event


@dataclass
class Live:
    url: str
    runtime: Runtime
    model: ScriptedModel
    gate: threading.Event
    keys: dict[str, str] = field(default_factory=dict)
    loop: asyncio.AbstractEventLoop | None = None

    def headers(self, who: str = "ann") -> dict[str, str]:
        return {"authorization": f"Bearer {self.keys[who]}"}

    def run(self, work: Callable[[], object]) -> object:
        """Run a coroutine function in the server's loop (to read its store)."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(work(), self.loop).result(10)  # type: ignore[arg-type]


async def open_store(kind: str, tmp_path: Path, postgres: sa.URL | None) -> Store:
    if kind == "sqlite":
        return await SQLiteStore.open(tmp_path / "protocols.db")
    assert postgres is not None
    return await open_postgres(postgres)


def serve(
    kind: str,
    tmp_path: Path,
    postgres: sa.URL | None = None,
    build: Callable[[Runtime], FastAPI] | None = None,
) -> Iterator[Live]:
    """A live server on a store of ``kind`` (``sqlite`` or ``postgres``)."""
    ready = threading.Event()
    holder: dict[str, object] = {}
    scripted = ScriptedModel()
    model = GateModel(scripted)

    async def main() -> None:
        store = await open_store(kind, tmp_path, postgres)
        runtime = Runtime(store, model=model, data_dir=tmp_path / "data")
        keys = {who: (await create_key(store, who, "test"))[1] for who in ("ann", "bob")}
        auth = AuthSettings(mode="keys", key_cache_s=0)
        if build is not None:
            app = build(runtime)
        else:
            app = create_app(runtime, model_name=model.name, store_name=kind, auth=auth)
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical",
                                log_config=None)  # fmt: skip
        server = uvicorn.Server(config)
        holder.update(server=server, runtime=runtime, keys=keys,
                      loop=asyncio.get_running_loop())  # fmt: skip
        ready.set()
        await server.serve()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not ready.is_set() or not holder["server"].started:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.005)
    server = holder["server"]
    assert isinstance(server, uvicorn.Server)
    port = server.servers[0].sockets[0].getsockname()[1]
    runtime = holder["runtime"]
    assert isinstance(runtime, Runtime)
    live = Live(f"http://127.0.0.1:{port}", runtime, scripted, model.gate)
    live.keys = holder["keys"]  # type: ignore[assignment]
    live.loop = holder["loop"]  # type: ignore[assignment]
    try:
        yield live
    finally:
        model.gate.set()
        server.should_exit = True
        thread.join(timeout=20)


__all__ = ["Live", "PostgresStore", "serve"]
