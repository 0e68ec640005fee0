"""A server shutting down, over HTTP: ``/healthz`` says ``draining``, new turns get a 503
with a JSON body and ``Retry-After``, a waiting JSON request gets its turn's result
(``cancelled`` when the grace ran out) or a 503 saying its message stays queued; and a
JSON turn that is cancelled (supersede) answers its result, not a 500."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.server.process import GracefulServer
from ostinato.store.base import Store
from tests.server.people import GatedModel, client_for, eventually


@pytest.fixture
def gated() -> GatedModel:
    return GatedModel()


@pytest.fixture
async def gated_runtime(store: Store, gated: GatedModel) -> AsyncIterator[Runtime]:
    runtime = Runtime(store, model=gated)
    yield runtime
    gated.open_all()
    await runtime.close()


@pytest.fixture
def app(gated_runtime: Runtime) -> FastAPI:
    return create_app(gated_runtime, ping_interval=0.2)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(app) as client:
        yield client


async def test_a_draining_server_refuses_new_turns_and_answers_waiting_ones(
    client: httpx.AsyncClient, gated_runtime: Runtime, gated: GatedModel, conversation_id: str
) -> None:
    url = f"/v1/conversations/{conversation_id}/turns"
    running = asyncio.ensure_future(client.post(url, json={"text": "first"}))
    await eventually(lambda: _true(gated.calls == 1))
    waiting = asyncio.ensure_future(client.post(url, json={"text": "second"}))
    await eventually(lambda: _queued(gated_runtime, conversation_id))

    draining = asyncio.ensure_future(gated_runtime.drain(0.05))
    await eventually(lambda: _true(gated_runtime.draining))
    health = await client.get("/healthz")
    assert health.status_code == 503 and health.json()["status"] == "draining"
    live = await client.get("/livez")  # alive while it drains: liveness must not kill it
    assert live.status_code == 200 and live.json() == {"status": "alive", "draining": True}
    other = (await client.post("/v1/conversations")).json()["id"]
    refused = await client.post(f"/v1/conversations/{other}/turns", json={"text": "hi"})
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "shutting_down"
    assert int(refused.headers["retry-after"]) >= 1
    await draining

    first = await running
    assert first.status_code == 200 and first.json()["stop_reason"] == "cancelled"
    assert first.json()["messages"][0]["blocks"][0]["text"] == "first"
    second = await waiting
    assert second.status_code == 503 and "retry-after" not in second.headers
    assert "stays in the conversation's queue" in second.json()["error"]["message"]
    assert len(await gated_runtime.store.list_queued(conversation_id)) == 1


async def test_a_superseded_json_turn_answers_its_cancelled_result(
    client: httpx.AsyncClient, gated: GatedModel, conversation_id: str
) -> None:
    url = f"/v1/conversations/{conversation_id}/turns"
    first = asyncio.ensure_future(client.post(url, json={"text": "first"}))
    await eventually(lambda: _true(gated.calls == 1))
    second = asyncio.ensure_future(
        client.post(url, json={"text": "instead", "policy": "supersede"})
    )
    answer = await first
    assert answer.status_code == 200 and answer.json()["stop_reason"] == "cancelled"
    gated.open_all()
    assert (await second).json()["stop_reason"] == "end_turn"


async def _true(value: bool) -> bool:
    return value


async def _queued(runtime: Runtime, cid: str) -> bool:
    return bool(await runtime.store.list_queued(cid))


async def test_a_second_signal_hurries_the_shutdown(gated_runtime: Runtime, app: FastAPI) -> None:
    server = GracefulServer(uvicorn.Config(app), app, gated_runtime, grace=3600)
    hurry = asyncio.Event()
    server._hurry, server._loop = hurry, asyncio.get_running_loop()
    server.handle_exit(signal.SIGTERM, None)
    await asyncio.sleep(0)
    assert server.should_exit and not hurry.is_set()
    server.handle_exit(signal.SIGTERM, None)
    await asyncio.wait_for(hurry.wait(), 5)
