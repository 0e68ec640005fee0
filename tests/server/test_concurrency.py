"""One turn at a time over HTTP: a queued message's stream answers at once with
``input.queued`` and then its own turn; ``reject`` is a 409; ``supersede`` cancels the
running turn; ``POST /cancel``; and ``cancel_on_disconnect``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.base import Store
from tests.server.people import GatedModel, client_for, eventually, last_turn, sse_turn

pytestmark = pytest.mark.usefixtures("gated_runtime")


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


async def test_a_queued_message_streams_at_once_then_its_own_turn(
    app: FastAPI, gated: GatedModel, conversation_id: str
) -> None:
    async with sse_turn(app, conversation_id, {"text": "first"}) as first:
        head = await first.frames_until("text.delta")
        first_run = head[0].data["run_id"]
        # The first turn is blocked mid-stream: the second request still gets its
        # response at once, with its place in the queue.
        body = {"text": "second", "client_message_id": "c-2"}
        async with sse_turn(app, conversation_id, body) as second:
            assert second.status == 200
            queued = await second.next_frame()
            assert queued.event == "input.queued"
            assert queued.data["client_message_id"] == "c-2"
            assert queued.data["position"] >= 1 and queued.data["queued_id"]
            assert queued.data["run_id"] == first_run  # the turn it waits behind
            gated.open_all()
            rest = await second.frames_until("turn.finished")
        first_rest = await first.frames_until("turn.finished")
    assert first_rest[-1].data["stop_reason"] == "end_turn"
    assert rest[0].event == "turn.started"
    own = {e.data["run_id"] for e in rest}
    assert len(own) == 1 and first_run not in own  # only its own turn's frames
    user = next(e.data for e in rest if e.event == "message")
    assert user["message"]["role"] == "user" and user["client_message_id"] == "c-2"
    assert rest[-1].data["stop_reason"] == "end_turn"
    assert "".join(e.data["text"] for e in rest if e.event == "text.delta") == "working done 2"


async def test_a_queued_json_request_waits_and_says_it_was_queued(
    app: FastAPI,
    client: httpx.AsyncClient,
    gated_runtime: Runtime,
    gated: GatedModel,
    conversation_id: str,
) -> None:
    async with sse_turn(app, conversation_id, {"text": "first"}) as first:
        await first.frames_until("text.delta")
        url = f"/v1/conversations/{conversation_id}/turns"
        second = asyncio.ensure_future(client.post(url, json={"text": "second"}))

        async def stored() -> bool:
            return len(await gated_runtime.store.list_queued(conversation_id)) == 1

        await eventually(stored)
        assert not second.done()
        gated.open_all()
        body = (await second).json()
    assert body["stop_reason"] == "end_turn" and body["queued_position"] >= 1
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
    assert body["messages"][0]["blocks"][0]["text"] == "second"


async def test_reject_is_409_and_stores_nothing(
    app: FastAPI,
    client: httpx.AsyncClient,
    gated_runtime: Runtime,
    gated: GatedModel,
    conversation_id: str,
) -> None:
    url = f"/v1/conversations/{conversation_id}/turns"
    async with sse_turn(app, conversation_id, {"text": "first"}) as first:
        await first.frames_until("text.delta")
        for headers in ({}, {"accept": "text/event-stream"}):
            rejected = await client.post(
                url, json={"text": "impatient", "policy": "reject"}, headers=headers
            )
            assert rejected.status_code == 409
            assert "reject" in rejected.json()["error"]["message"]
        gated.open_all()
        await first.frames_until("turn.finished")
    rows = await gated_runtime.store.list_messages(conversation_id)
    assert [m.text for m in rows if m.role == "user"] == ["first"]
    assert await gated_runtime.store.list_queued(conversation_id) == []


async def test_supersede_cancels_the_running_turn_then_runs(
    app: FastAPI, client: httpx.AsyncClient, gated: GatedModel, conversation_id: str
) -> None:
    url = f"/v1/conversations/{conversation_id}/turns"
    async with sse_turn(app, conversation_id, {"text": "first"}) as first:
        await first.frames_until("text.delta")
        second = asyncio.ensure_future(
            client.post(url, json={"text": "instead", "policy": "supersede"})
        )
        finished = (await first.frames_until("turn.finished"))[-1].data
        assert finished["stop_reason"] == "cancelled"
        gated.open_all()
        body = (await second).json()
    assert body["stop_reason"] == "end_turn"
    assert body["messages"][0]["blocks"][0]["text"] == "instead"


async def test_cancel_while_streaming(
    app: FastAPI, client: httpx.AsyncClient, conversation_id: str
) -> None:
    base = f"/v1/conversations/{conversation_id}"
    async with sse_turn(app, conversation_id, {"text": "go"}) as stream:
        started = await stream.next_frame()
        await stream.frames_until("text.delta")
        outcome = await client.post(f"{base}/cancel")
        assert outcome.json() == {"cancelled_turn": started.data["turn_id"], "dismissed": []}
        finished = (await stream.frames_until("turn.finished"))[-1].data
    assert finished["stop_reason"] == "cancelled"
    nothing = await client.post(f"{base}/cancel")
    assert nothing.status_code == 409 and "nothing to cancel" in nothing.json()["error"]["message"]
    assert (await client.get(base)).json()["state"] == "idle"


async def test_leaving_does_not_cancel_by_default(
    app: FastAPI, gated_runtime: Runtime, gated: GatedModel, conversation_id: str
) -> None:
    async with sse_turn(app, conversation_id, {"text": "go"}) as stream:
        await stream.frames_until("text.delta")
    assert gated_runtime.busy(conversation_id)
    gated.open_all()
    await eventually(lambda: _ended(gated_runtime, conversation_id))
    turn = await last_turn(gated_runtime.store, conversation_id)
    assert turn.stop_reason == "end_turn"


async def test_cancel_on_disconnect_cancels_that_turn_only(
    app: FastAPI, gated_runtime: Runtime, gated: GatedModel, conversation_id: str
) -> None:
    store = gated_runtime.store
    keep = {"text": "keep me"}
    drop = {"text": "drop me", "cancel_on_disconnect": True}
    async with sse_turn(app, conversation_id, keep) as first:
        await first.frames_until("text.delta")
        async with sse_turn(app, conversation_id, drop) as second:
            assert (await second.next_frame()).event == "input.queued"
        # The second client left while its message waited: the running turn goes on.
        assert gated_runtime.busy(conversation_id)
        gated.open(1)
        assert (await first.frames_until("turn.finished"))[-1].data["stop_reason"] == "end_turn"

    async def both_ended() -> bool:
        turns = await store.list_turns(conversation_id)
        return len(turns) == 2 and all(t.status == "finished" for t in turns)

    await eventually(both_ended)
    turns = sorted(await store.list_turns(conversation_id), key=lambda t: t.started_at)
    assert [t.stop_reason for t in turns] == ["end_turn", "cancelled"]

    async with sse_turn(app, conversation_id, drop) as running:
        await running.frames_until("text.delta")
    await eventually(lambda: _ended(gated_runtime, conversation_id))
    assert (await last_turn(store, conversation_id)).stop_reason == "cancelled"
    users = [m.text for m in await store.list_messages(conversation_id) if m.role == "user"]
    assert users == ["keep me", "drop me", "drop me"]  # accepted messages stay stored


async def _ended(runtime: Runtime, cid: str) -> bool:
    turns = await runtime.store.list_turns(cid)
    return not runtime.busy(cid) and all(t.status == "finished" for t in turns)


async def test_a_json_turn_cancelled_from_elsewhere_answers_its_result(
    client: httpx.AsyncClient, gated_runtime: Runtime, gated: GatedModel, conversation_id: str
) -> None:
    base = f"/v1/conversations/{conversation_id}"
    waiting = asyncio.ensure_future(client.post(f"{base}/turns", json={"text": "go"}))
    await eventually(lambda: _streaming(gated, gated_runtime, conversation_id))
    outcome = await client.post(f"{base}/cancel")
    assert outcome.status_code == 200 and outcome.json()["cancelled_turn"]
    response = await waiting
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["turn_id"] == outcome.json()["cancelled_turn"]
    assert body["stop_reason"] == "cancelled" and body["error"] is None
    assert body["messages"][0]["role"] == "user"
    assert body["messages"][0]["blocks"] == [{"type": "text", "text": "go"}]
    stored = (await client.get(f"{base}/messages")).json()["messages"]
    assert body["messages"] == stored
    turn = await last_turn(gated_runtime.store, conversation_id)
    assert body["metrics"] == turn.metrics and body["run_id"] == turn.run_id


async def _streaming(gated: GatedModel, runtime: Runtime, cid: str) -> bool:
    return gated.calls == 1 and runtime.busy(cid)


async def test_a_json_turn_superseded_answers_cancelled(
    client: httpx.AsyncClient, gated_runtime: Runtime, gated: GatedModel, conversation_id: str
) -> None:
    url = f"/v1/conversations/{conversation_id}/turns"
    first = asyncio.ensure_future(client.post(url, json={"text": "first"}))
    await eventually(lambda: _streaming(gated, gated_runtime, conversation_id))
    gated.open(2)
    second = await client.post(url, json={"text": "instead", "policy": "supersede"})
    assert second.status_code == 200 and second.json()["stop_reason"] == "end_turn"
    superseded = await first
    assert superseded.status_code == 200, superseded.text
    assert superseded.json()["stop_reason"] == "cancelled"
    assert [m["blocks"][0]["text"] for m in superseded.json()["messages"]][:1] == ["first"]
