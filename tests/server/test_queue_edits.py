"""The waiting messages over HTTP: ``GET …/queue`` lists them (with ``steer``),
``PATCH …/queue/{id}`` changes one's text (the turn it runs later uses the new text),
``DELETE …/queue/{id}`` withdraws one (it never runs; its waiting request gets a 409);
a message of another conversation is a 404, one a turn took already a 409; each change
is an ``input.changed`` frame."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from ostinato.bus import Subscription
from ostinato.frames import Frame, InputChanged
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.base import Store
from tests.server.people import GatedModel, client_for, eventually, sse_turn


@pytest.fixture
def gated() -> GatedModel:
    return GatedModel()


@pytest.fixture
async def runtime(store: Store, gated: GatedModel) -> AsyncIterator[Runtime]:
    runtime = Runtime(store, model=gated)
    yield runtime
    gated.open_all()
    await runtime.close()


@pytest.fixture
def app(runtime: Runtime) -> FastAPI:
    return create_app(runtime, ping_interval=0.2)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(app) as client:
        yield client


async def queued_ids(client: httpx.AsyncClient, cid: str) -> list[str]:
    listed = (await client.get(f"/v1/conversations/{cid}/queue")).json()["queued"]
    return [q["id"] for q in listed]


async def test_a_waiting_message_is_edited_then_runs_with_its_new_text(
    app: FastAPI, client: httpx.AsyncClient, runtime: Runtime, gated: GatedModel
) -> None:
    cid = (await client.post("/v1/conversations", json={})).json()["id"]
    other = (await client.post("/v1/conversations", json={})).json()["id"]
    seen = runtime.bus.subscribe(cid)
    url = f"/v1/conversations/{cid}/turns"
    async with sse_turn(app, cid, {"text": "first"}) as first:
        await first.frames_until("text.delta")
        later = asyncio.ensure_future(client.post(url, json={"text": "typo hree"}))

        async def listed() -> bool:
            return len(await queued_ids(client, cid)) == 1

        await eventually(listed)
        (item,) = (await client.get(f"/v1/conversations/{cid}/queue")).json()["queued"]
        assert item["steer"] is False and item["status"] == "queued"
        edited = await client.patch(
            f"/v1/conversations/{cid}/queue/{item['id']}", json={"text": "typo here"}
        )
        assert edited.status_code == 200 and edited.json()["text"] == "typo here"
        elsewhere = await client.patch(
            f"/v1/conversations/{other}/queue/{item['id']}", json={"text": "x"}
        )
        assert elsewhere.status_code == 404
        missing = await client.delete(f"/v1/conversations/{cid}/queue/nope")
        assert missing.status_code == 404
        gated.open_all()
        await first.frames_until("turn.finished")
        body = (await later).json()
    assert body["messages"][0]["blocks"][0]["text"] == "typo here"
    late = await client.patch(f"/v1/conversations/{cid}/queue/{item['id']}", json={"text": "y"})
    assert late.status_code == 409  # its turn took it
    changed = [f for f in _frames(seen) if isinstance(f, InputChanged)]
    assert [(f.queued_id, f.withdrawn) for f in changed] == [(item["id"], False)]
    assert changed[0].message is not None and changed[0].message.text == "typo here"


async def test_a_withdrawn_message_never_runs_and_its_request_is_told(
    app: FastAPI, client: httpx.AsyncClient, runtime: Runtime, gated: GatedModel
) -> None:
    cid = (await client.post("/v1/conversations", json={})).json()["id"]
    seen = runtime.bus.subscribe(cid)
    url = f"/v1/conversations/{cid}/turns"
    async with sse_turn(app, cid, {"text": "first"}) as first:
        await first.frames_until("text.delta")
        body = {"text": "never mind", "policy": "steer"}
        later = asyncio.ensure_future(client.post(url, json=body))

        async def listed() -> bool:
            return len(await queued_ids(client, cid)) == 1

        await eventually(listed)
        (qid,) = await queued_ids(client, cid)
        gone = await client.delete(f"/v1/conversations/{cid}/queue/{qid}")
        assert gone.status_code == 200 and gone.json()["status"] == "dropped"
        answer = await later
        assert answer.status_code == 409 and "withdrawn" in answer.json()["error"]["message"]
        again = await client.delete(f"/v1/conversations/{cid}/queue/{qid}")
        assert again.status_code == 409
        assert await queued_ids(client, cid) == []
        gated.open_all()
        await first.frames_until("turn.finished")
    rows = await runtime.store.list_messages(cid)
    assert [m.text for m in rows if m.role == "user"] == ["first"]
    changed = [f for f in _frames(seen) if isinstance(f, InputChanged)]
    assert [(f.queued_id, f.withdrawn) for f in changed] == [(qid, True)]


def _frames(subscription: Subscription) -> list[Frame]:
    out = []
    while (frame := subscription.take()) is not None:
        out.append(frame)
    return out


@pytest.mark.parametrize("text", ["", "  \n", "a\x00b"])
async def test_an_edit_needs_some_text_without_a_nul(client: httpx.AsyncClient, text: str) -> None:
    cid = (await client.post("/v1/conversations", json={})).json()["id"]
    refused = await client.patch(f"/v1/conversations/{cid}/queue/q", json={"text": text})
    assert refused.status_code == 422
