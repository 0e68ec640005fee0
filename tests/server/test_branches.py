"""The tree on the native API, on every engine: edit, regenerate, siblings, leaves and
switch; the versions ``/messages`` shows where a branch forks; the frames; bad input."""

from __future__ import annotations

import asyncio

import httpx
from fastapi import FastAPI

from ostinato.models.base import Stop, TextDelta
from ostinato.models.scripted import ScriptedModel, Step, text_step, tool_step
from ostinato.runtime import Runtime
from tests.server.conftest import Callers
from tests.server.sse_client import frames, open_stream, parse_stream

SSE = {"accept": "text/event-stream"}


async def two_exchanges(client: httpx.AsyncClient, model: ScriptedModel, cid: str) -> None:
    model.add(text_step("a1"), text_step("a2"))
    for text in ("q1", "q2"):
        response = await client.post(f"/v1/conversations/{cid}/turns", json={"text": text})
        assert response.status_code == 200, response.text


async def shown(client: httpx.AsyncClient, cid: str) -> list[dict[str, object]]:
    response = await client.get(f"/v1/conversations/{cid}/messages")
    assert response.status_code == 200
    rows: list[dict[str, object]] = response.json()["messages"]
    return rows


def texts(rows: list[dict[str, object]]) -> list[str]:
    return ["".join(b["text"] for b in r["blocks"] if b["type"] == "text") for r in rows]  # type: ignore[attr-defined, index]


async def test_edit_answers_like_a_turn_and_messages_show_the_versions(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    cid = conversation_id
    await two_exchanges(client, model, cid)
    model.add(text_step("a2 for the edit"))
    edited = await client.post(f"/v1/conversations/{cid}/messages/3/edit", json={"text": "q2!"})
    assert edited.status_code == 200, edited.text
    turn = edited.json()
    assert texts(turn["messages"]) == ["q2!", "a2 for the edit"]
    assert turn["messages"][0]["parent_seq"] == 2 and turn["messages"][0]["seq"] == 5
    rows = await shown(client, cid)
    assert texts(rows) == ["q1", "a1", "q2!", "a2 for the edit"]
    assert rows[2]["siblings"] == [
        {"seq": 3, "leaf": 4, "current": False},
        {"seq": 5, "leaf": 6, "current": True},
    ]
    assert rows[0]["siblings"] is None and rows[3]["siblings"] is None
    newest = await client.get(f"/v1/conversations/{cid}/messages", params={"newest": 2})
    assert newest.json()["messages"][0]["siblings"] is not None
    siblings = (await client.get(f"/v1/conversations/{cid}/messages/5/siblings")).json()
    assert siblings["parent_seq"] == 2 and siblings["index"] == 1
    assert [(s["seq"], s["leaf"]) for s in siblings["siblings"]] == [(3, 4), (5, 6)]
    assert texts([s["message"] for s in siblings["siblings"]]) == ["q2", "q2!"]


async def test_regenerate_streams_with_branch_changed_first(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    cid = conversation_id
    await two_exchanges(client, model, cid)
    model.add(text_step("a2, again"))
    response = await client.post(
        f"/v1/conversations/{cid}/messages/4/regenerate", json={}, headers=SSE
    )
    assert response.status_code == 200
    events = frames(parse_stream(response.text))
    types = [e.event for e in events]
    assert types[:2] == ["turn.started", "branch.changed"]
    assert events[0].data["kind"] == "regenerate"
    moved = events[1].data
    assert (moved["tip"], moved["ranges"], moved["since"]) == (3, [[1, 3]], 4)
    assert types[-1] == "turn.finished"
    assert texts(await shown(client, cid)) == ["q1", "a1", "q2", "a2, again"]
    assert seen_by_model(model) == ["q1", "a1", "q2"]


def seen_by_model(model: ScriptedModel) -> list[str]:
    return [m.text for m in model.requests[-1].messages if m.text]


async def test_branches_and_a_switch(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    cid = conversation_id
    await two_exchanges(client, model, cid)
    model.add(text_step("a2, again"))
    await client.post(f"/v1/conversations/{cid}/messages/4/regenerate")
    listed = (await client.get(f"/v1/conversations/{cid}/branches")).json()
    assert listed["leaf"] == 5
    assert [(b["seq"], b["current"], b["forks_at"]) for b in listed["leaves"]] == [
        (4, False, 3),
        (5, True, 5),
    ]
    switched = await client.put(f"/v1/conversations/{cid}/branch", json={"leaf": 4})
    assert switched.status_code == 200, switched.text
    assert switched.json() == {"leaf": 4, "ranges": [[1, 4]], "since": 5}
    assert texts(await shown(client, cid)) == ["q1", "a1", "q2", "a2"]
    model.add(text_step("a3"))
    await client.post(f"/v1/conversations/{cid}/turns", json={"text": "q3"})
    assert seen_by_model(model) == ["q1", "a1", "q2", "a2", "q3"]
    conversation = (await client.get(f"/v1/conversations/{cid}")).json()
    assert conversation["id"] == cid


async def test_bad_input(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    cid = conversation_id
    await two_exchanges(client, model, cid)
    answer = await client.post(f"/v1/conversations/{cid}/messages/2/edit", json={"text": "x"})
    assert answer.status_code == 422 and "only a user message" in answer.text
    question = await client.post(f"/v1/conversations/{cid}/messages/1/regenerate")
    assert question.status_code == 422 and "regenerate names an answer" in question.text
    missing = await client.post(f"/v1/conversations/{cid}/messages/9/edit", json={"text": "x"})
    assert missing.status_code == 404
    assert (await client.get(f"/v1/conversations/{cid}/messages/9/siblings")).status_code == 404
    inner = await client.put(f"/v1/conversations/{cid}/branch", json={"leaf": 2})
    assert inner.status_code == 422
    assert "not a leaf" in inner.json()["error"]["message"] and "leaves: 4" in inner.text
    card = await client.post(
        f"/v1/conversations/{cid}/messages/3/edit",
        json={"tool_response": {"tool_use_id": "x", "result": "y"}},
    )
    assert card.status_code == 422
    assert len(await shown(client, cid)) == 4  # nothing was written


async def test_a_switch_while_a_turn_runs_is_a_409_and_an_edit_follows_the_policy(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str, runtime: Runtime
) -> None:
    cid = conversation_id
    await two_exchanges(client, model, cid)
    slow = Step((*(TextDelta(f"w{i} ") for i in range(40)), Stop("end_turn")), delay=0.02)
    model.add(slow, text_step("for the edit"))
    subscription = runtime.bus.subscribe(cid)
    running = asyncio.ensure_future(
        client.post(f"/v1/conversations/{cid}/turns", json={"text": "q3"})
    )
    while (await subscription.get(within=5)).type != "text.delta":
        pass  # the slow answer is streaming
    subscription.close()
    busy = await client.put(f"/v1/conversations/{cid}/branch", json={"leaf": 4})
    assert busy.status_code == 409
    refused = await client.post(
        f"/v1/conversations/{cid}/messages/3/edit", json={"text": "q2!", "policy": "reject"}
    )
    assert refused.status_code == 409
    queued = await client.post(f"/v1/conversations/{cid}/messages/3/edit", json={"text": "q2!"})
    assert queued.status_code == 200 and queued.json()["queued_position"] is not None
    assert (await running).status_code == 200
    assert texts(await shown(client, cid)) == ["q1", "a1", "q2!", "for the edit"]


async def test_an_edit_keeps_the_files_unless_new_ones_come(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    cid = conversation_id
    model.add(text_step("read it"), text_step("read it again"))
    files = {"files": ("note.txt", b"hello file", "text/plain")}
    sent = await client.post(f"/v1/conversations/{cid}/turns", data={"text": "see"}, files=files)
    assert sent.status_code == 200, sent.text
    edited = await client.post(f"/v1/conversations/{cid}/messages/1/edit", json={"text": "look"})
    assert edited.status_code == 200, edited.text
    blocks = edited.json()["messages"][0]["blocks"]
    assert [b["type"] for b in blocks] == ["text", "file"] and blocks[1]["name"] == "note.txt"


async def test_another_owner_gets_a_404(callers: Callers, model: ScriptedModel) -> None:
    model.add(text_step("a1"), tool_step(("calculator", {"expression": "1"})), text_step("x"))
    cid = (await callers.ann.post("/v1/conversations")).json()["id"]
    await callers.ann.post(f"/v1/conversations/{cid}/turns", json={"text": "q1"})
    for method, path, body in (
        ("POST", f"/v1/conversations/{cid}/messages/1/edit", {"text": "mine"}),
        ("POST", f"/v1/conversations/{cid}/messages/2/regenerate", {}),
        ("GET", f"/v1/conversations/{cid}/messages/1/siblings", None),
        ("GET", f"/v1/conversations/{cid}/branches", None),
        ("PUT", f"/v1/conversations/{cid}/branch", {"leaf": 2}),
    ):
        response = await callers.bob.request(method, path, json=body)
        assert response.status_code == 404, (method, path, response.text)


async def test_a_stream_resumed_after_a_switch_is_told_the_branch_moved(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str, app: FastAPI
) -> None:
    cid = conversation_id
    await two_exchanges(client, model, cid)
    model.add(text_step("a2, again"))
    await client.post(f"/v1/conversations/{cid}/messages/4/regenerate")
    await client.put(f"/v1/conversations/{cid}/branch", json={"leaf": 4})  # writes no row
    path = f"/v1/conversations/{cid}/events"
    async with open_stream(app, "GET", path, headers={"last-event-id": "5"}) as stream:
        moved = await stream.next_frame()
    assert moved.event == "branch.changed" and moved.id is None
    assert (moved.data["tip"], moved.data["since"], moved.data["seq"]) == (4, 5, 5)
    async with open_stream(app, "GET", path, headers={"last-event-id": "2"}) as stream:
        replayed = [await stream.next_frame() for _ in range(3)]
    assert [e.event for e in replayed] == ["message", "message", "branch.changed"]
    assert [e.data["seq"] for e in replayed[:2]] == [3, 4]  # the current branch's rows
