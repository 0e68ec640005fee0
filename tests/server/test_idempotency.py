"""Idempotent retries: an ``Idempotency-Key`` (or a ``client_message_id``) sent again
with the same request gets the first request's answer, and nothing is stored twice."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store import open_store
from ostinato.store.base import Store
from tests.server.conftest import Callers
from tests.server.people import GatedModel, client_for, eventually
from tests.server.sse_client import Stream, frames, open_stream, parse_stream
from tests.store.conftest import open_postgres

KEY = {"idempotency-key": "retry-1"}


async def _user_rows(client: httpx.AsyncClient, cid: str) -> list[str]:
    page = (await client.get(f"/v1/conversations/{cid}/messages")).json()
    return [m["blocks"][0]["text"] for m in page["messages"] if m["role"] == "user"]


async def test_a_retry_gets_the_first_result_and_runs_nothing(
    client: httpx.AsyncClient, model: ScriptedModel, store: Store, conversation_id: str
) -> None:
    model.add(text_step("Hello."))
    url = f"/v1/conversations/{conversation_id}/turns"
    first = await client.post(url, json={"text": "hi"}, headers=KEY)
    again = await client.post(url, json={"text": "hi"}, headers=KEY)
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json()
    assert await _user_rows(client, conversation_id) == ["hi"]
    assert len(await store.list_turns(conversation_id)) == 1
    model.assert_consumed()  # one model call: a second one would fail the script
    # the retry as a stream: the same turn's frames, read back from the store
    replay = await client.post(
        url, json={"text": "hi"}, headers={**KEY, "accept": "text/event-stream"}
    )
    events = frames(parse_stream(replay.text))
    assert [e.event for e in events] == ["turn.started", "message", "message", "turn.finished"]
    assert {e.data["run_id"] for e in events} == {first.json()["run_id"]}
    assert [e.data["message"] for e in events[1:3]] == first.json()["messages"]
    assert events[-1].data["stop_reason"] == "end_turn"


async def test_a_reused_key_with_another_body_is_a_422(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(text_step("Hello."))
    url = f"/v1/conversations/{conversation_id}/turns"
    assert (await client.post(url, json={"text": "hi"}, headers=KEY)).status_code == 200
    other = await client.post(url, json={"text": "hello"}, headers=KEY)
    assert other.status_code == 422
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert "another request" in other.json()["error"]["message"]
    elsewhere = await client.post("/v1/conversations", headers=KEY)  # another route
    assert elsewhere.status_code == 422
    bad = await client.post(url, json={"text": "x"}, headers={"idempotency-key": " "})
    assert bad.status_code == 422
    assert await _user_rows(client, conversation_id) == ["hi"]


async def test_a_client_message_id_is_a_key_in_its_conversation(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(text_step("One."), text_step("Two."))
    url = f"/v1/conversations/{conversation_id}/turns"
    body = {"text": "hi", "client_message_id": "m-1"}
    first = (await client.post(url, json=body)).json()
    assert (await client.post(url, json=body)).json() == first
    other = (await client.post("/v1/conversations")).json()["id"]
    elsewhere = await client.post(f"/v1/conversations/{other}/turns", json=body)
    assert elsewhere.json()["turn_id"] != first["turn_id"]  # another conversation's message
    reused = await client.post(url, json={"text": "bye", "client_message_id": "m-1"})
    assert reused.status_code == 422
    assert await _user_rows(client, conversation_id) == ["hi"]
    model.assert_consumed()


async def test_a_new_conversation_is_created_once(client: httpx.AsyncClient) -> None:
    body = {"title": "Trip"}
    first = await client.post("/v1/conversations", json=body, headers=KEY)
    again = await client.post("/v1/conversations", json=body, headers=KEY)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    listed = (await client.get("/v1/conversations")).json()["conversations"]
    assert [c["id"] for c in listed] == [first.json()["id"]]
    other = await client.post("/v1/conversations", json={"title": "Other"}, headers=KEY)
    assert other.status_code == 422


async def test_keys_are_per_owner(callers: Callers, model: ScriptedModel) -> None:
    model.add(text_step("For Ann."), text_step("For Bob."))
    made = {}
    for who in ("ann", "bob"):
        client = getattr(callers, who)
        made[who] = await client.post("/v1/conversations", headers=KEY)
        assert made[who].status_code == 201
    assert made["ann"].json()["id"] != made["bob"].json()["id"]
    for who in ("ann", "bob"):
        client = getattr(callers, who)
        cid = made[who].json()["id"]
        turn = await client.post(
            f"/v1/conversations/{cid}/turns", json={"text": "hi"}, headers={"idempotency-key": "t"}
        )
        assert turn.status_code == 200 and turn.json()["stop_reason"] == "end_turn"
    model.assert_consumed()


async def test_a_refused_request_leaves_no_key(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    url = f"/v1/conversations/{conversation_id}/turns"
    refused = await client.post(url, json={"text": "hi", "agent": "nobody"}, headers=KEY)
    assert refused.status_code == 404
    model.add(text_step("Hello."))
    assert (await client.post(url, json={"text": "hi"}, headers=KEY)).status_code == 200


# --- at once, and across a restart ----------------------------------------------------


@pytest.fixture
def gated() -> GatedModel:
    return GatedModel()


@pytest.fixture
async def gated_app(store: Store, gated: GatedModel) -> AsyncIterator[FastAPI]:
    runtime = Runtime(store, model=gated)
    yield create_app(runtime, ping_interval=0.2)
    gated.open_all()
    await runtime.close()


async def test_requests_at_once_with_one_key_run_one_turn(
    gated_app: FastAPI, gated: GatedModel, store: Store
) -> None:
    async with client_for(gated_app) as client:
        cid = (await client.post("/v1/conversations")).json()["id"]
        url = f"/v1/conversations/{cid}/turns"
        posts = [
            asyncio.ensure_future(client.post(url, json={"text": "hi"}, headers=KEY))
            for _ in range(3)
        ]
        await eventually(lambda: _calls(gated, 1))
        async with sse_turn_with_key(gated_app, cid) as late:  # joins the running turn
            head = await late.frames_until("message")
            gated.open_all()
            rest = await late.frames_until("turn.finished")
        answers = [r.json() for r in await asyncio.gather(*posts)]
    assert all(a == answers[0] for a in answers)
    assert head[0].event == "turn.started" and head[0].data["run_id"] == answers[0]["run_id"]
    assert rest[-1].data["stop_reason"] == "end_turn"
    assert gated.calls == 1
    assert len(await store.list_turns(cid)) == 1


async def _calls(gated: GatedModel, count: int) -> bool:
    return gated.calls >= count


def sse_turn_with_key(app: FastAPI, cid: str) -> AbstractAsyncContextManager[Stream]:
    headers = {"accept": "text/event-stream", "content-type": "application/json", **KEY}
    url = f"/v1/conversations/{cid}/turns"
    return open_stream(app, "POST", url, headers=headers, body=b'{"text": "hi"}')


async def test_two_servers_on_one_store_run_one_turn(store: Store, gated: GatedModel) -> None:
    """Two processes' apps on one store: the store's key decides, the loser reads the
    winner's turn back once it ends."""
    one, two = Runtime(store, model=gated), Runtime(store, model=gated)
    try:
        apps = [create_app(one, ping_interval=0.2), create_app(two, ping_interval=0.2)]
        async with client_for(apps[0]) as first, client_for(apps[1]) as second:
            cid = (await first.post("/v1/conversations")).json()["id"]
            url = f"/v1/conversations/{cid}/turns"
            a = asyncio.ensure_future(first.post(url, json={"text": "hi"}, headers=KEY))
            await eventually(lambda: _calls(gated, 1))
            b = asyncio.ensure_future(second.post(url, json={"text": "hi"}, headers=KEY))
            gated.open_all()
            results = [r.json() for r in await asyncio.gather(a, b)]
        assert results[0] == results[1]
        assert gated.calls == 1 and len(await store.list_turns(cid)) == 1
    finally:
        gated.open_all()
        await one.close()
        await two.close()


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
async def test_a_retry_after_a_restart_gets_the_first_result(
    tmp_path: Path, model: ScriptedModel, engine: str, request: pytest.FixtureRequest
) -> None:
    if engine == "sqlite":
        url = f"sqlite:///{tmp_path / 'restart.db'}"
    else:
        url = request.getfixturevalue("postgres_url").render_as_string(hide_password=False)
        await (await open_postgres(request.getfixturevalue("postgres_url"))).close()  # empty
    model.add(text_step("Hello."))
    answers = []
    for _ in range(2):  # the same requests, to a server started afresh on the same store
        runtime = Runtime(await open_store(url), model=model)
        async with client_for(create_app(runtime)) as client:
            made = await client.post("/v1/conversations", headers={"idempotency-key": "c"})
            cid = made.json()["id"]
            turn = await client.post(
                f"/v1/conversations/{cid}/turns", json={"text": "hi"}, headers=KEY
            )
            answers.append((made.status_code, made.json(), turn.status_code, turn.json()))
            rows = await _user_rows(client, cid)
        await runtime.close()
    assert answers[0] == answers[1]
    assert rows == ["hi"]
    model.assert_consumed()


async def test_a_retry_that_cannot_learn_the_first_turn_is_a_409(
    store: Store, model: ScriptedModel
) -> None:
    """A first request elsewhere that has not said which turn it began: the retry waits
    ``join_wait_s``, then says so."""
    from ostinato.server.idempotency import Idempotency
    from ostinato.store.idempotency import RequestKey, RequestKeys

    runtime = Runtime(store, model=model)
    app = create_app(runtime, idempotency=Idempotency(join_wait_s=0.01))
    try:
        async with client_for(app) as client:
            cid = (await client.post("/v1/conversations")).json()["id"]
            url = f"/v1/conversations/{cid}/turns"
            model.add(text_step("Hello."))
            assert (await client.post(url, json={"text": "hi"}, headers=KEY)).status_code == 200
            assert isinstance(store, RequestKeys)
            stored = await store.get_request("local", "key:retry-1")
            assert stored is not None and stored.turn_id is not None
            await store.release_request("local", "key:retry-1")
            pending = RequestKey(
                "local",
                "key:retry-1",
                stored.fingerprint,
                stored.created_at,
                stored.expires_at,
                conversation_id=cid,
            )
            assert await store.claim_request(pending) is None  # another server, mid-request
            again = await client.post(url, json={"text": "hi"}, headers=KEY)
            assert again.status_code == 409
            assert again.json()["error"]["code"] == "idempotency_key_in_progress"
            model.assert_consumed()
            # the silent record is gone: the next retry runs afresh
            model.add(text_step("Hello again."))
            third = await client.post(url, json={"text": "hi"}, headers=KEY)
            assert third.status_code == 200 and third.json()["turn_id"] != stored.turn_id
        model.assert_consumed()
    finally:
        await runtime.close()


async def test_a_key_whose_message_waits_in_the_queue_is_never_freed(
    store: Store, model: ScriptedModel
) -> None:
    """A first request elsewhere that stored its message in the queue but never said
    which turn it became (its server died): retries are 409s and the key stays, so the
    message is not sent twice."""
    from ostinato.server.idempotency import Idempotency, fingerprint
    from ostinato.server.schemas import TurnRequest
    from ostinato.store.base import utcnow
    from ostinato.store.idempotency import RequestKey, RequestKeys

    runtime = Runtime(store, model=model)
    app = create_app(runtime, idempotency=Idempotency(join_wait_s=0.01))
    try:
        async with client_for(app) as client:
            cid = (await client.post("/v1/conversations")).json()["id"]
            url = f"/v1/conversations/{cid}/turns"
            assert isinstance(store, RequestKeys)
            # the fingerprint the route makes for this request
            from starlette.requests import Request

            scope = {"type": "http", "method": "POST", "path": url, "headers": []}
            body = TurnRequest(text="hi").model_dump(mode="json")
            print_ = fingerprint(Request(scope), body)
            now = utcnow()
            later = now.replace(year=now.year + 1)
            queued = RequestKey("local", "key:retry-1", print_, now, later, conversation_id=cid)
            await store.claim_request(queued)
            await store.settle_request("local", "key:retry-1", queued_id="q1", queued_position=1)
            for _ in range(2):
                again = await client.post(url, json={"text": "hi"}, headers=KEY)
                assert again.status_code == 409, again.text
            assert await store.get_request("local", "key:retry-1") is not None
        assert await store.list_turns(cid) == []
    finally:
        await runtime.close()
