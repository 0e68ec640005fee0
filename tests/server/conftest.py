"""Fixtures for the HTTP tests: a runtime with a scripted model on each store engine
(memory, SQLite, and PostgreSQL when ``OSTINATO_TEST_POSTGRES_URL`` is set), the app
serving it, and an httpx client that talks to the app in memory."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from ostinato.identity.keys import create_key
from ostinato.identity.settings import AuthSettings
from ostinato.models.scripted import ScriptedModel
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store import open_store
from ostinato.store.base import Store
from ostinato.store.memory import MemoryStore
from tests.store.conftest import open_postgres, postgres_url

__all__ = ["postgres_url"]  # the session's PostgreSQL database (skips without one)


async def _open(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    if engine == "memory":
        return MemoryStore()
    if engine == "sqlite":
        return await open_store(f"sqlite:///{tmp_path / 'server.db'}")
    return await open_postgres(request.getfixturevalue("postgres_url"))


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return await _open(request.param, tmp_path, request)


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
async def runtime(store: Store, model: ScriptedModel) -> AsyncIterator[Runtime]:
    runtime = Runtime(store, model=model)
    yield runtime
    await runtime.close()


@pytest.fixture
def app(runtime: Runtime) -> FastAPI:
    return create_app(runtime, model_name="scripted:model", store_name="test", ping_interval=0.2)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        yield client


@pytest.fixture
async def conversation_id(client: httpx.AsyncClient) -> str:
    response = await client.post("/v1/conversations")
    assert response.status_code == 201
    cid: str = response.json()["id"]
    return cid


@dataclass
class Callers:
    """A keys-mode app and a client for each of its owners (``ann``, ``bob``) plus one
    without credentials."""

    app: FastAPI
    ann: httpx.AsyncClient
    bob: httpx.AsyncClient
    nobody: httpx.AsyncClient
    keys: dict[str, str]


@pytest.fixture
async def callers(runtime: Runtime) -> AsyncIterator[Callers]:
    app = create_app(
        runtime,
        model_name="scripted:model",
        store_name="test",
        ping_interval=0.2,
        auth=AuthSettings(mode="keys", stream_recheck_s=0.05, key_cache_s=0),
    )
    keys = {who: (await create_key(runtime.store, who, "test"))[1] for who in ("ann", "bob")}
    transport = httpx.ASGITransport(app=app)
    async with contextlib.AsyncExitStack() as stack:
        clients = {
            who: await stack.enter_async_context(
                httpx.AsyncClient(
                    transport=transport,
                    base_url="http://test",
                    headers={"authorization": f"Bearer {keys[who]}"} if who in keys else {},
                )
            )
            for who in ("ann", "bob", "nobody")
        }
        yield Callers(app, clients["ann"], clients["bob"], clients["nobody"], keys)
    await app.state.ostinato.aclose()
