"""``POST /v1/conversations/{id}/turns``: JSON result, or the turn's frames as SSE."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request

from ostinato.models.base import Model
from ostinato.models.scripted import ScriptedModel, Step, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from tests.server.sse_client import frames, open_stream, parse_stream

SSE = {"accept": "text/event-stream"}


async def test_json_turn_returns_its_result(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(tool_step(("calculator", {"expression": "2*(3+4)"})), text_step("It is 14."))
    response = await client.post(
        f"/v1/conversations/{conversation_id}/turns", json={"text": "2*(3+4)?"}
    )
    assert response.status_code == 200
    body = response.json()
    assert body["stop_reason"] == "end_turn"
    assert body["turn_id"] and body["run_id"]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert [m["seq"] for m in body["messages"]] == [1, 2, 3, 4]
    assert body["messages"][-1]["blocks"] == [{"type": "text", "text": "It is 14."}]
    assert body["metrics"]["model_calls"] == 2
    stored = (await client.get(f"/v1/conversations/{conversation_id}/messages")).json()
    assert stored["messages"] == body["messages"]
    model.assert_consumed()


async def test_sse_turn_streams_framed_events(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(
        tool_step(("calculator", {"expression": "2*(3+4)"})), text_step("It is 14.", chunks=3)
    )
    response = await client.post(
        f"/v1/conversations/{conversation_id}/turns", json={"text": "sum?"}, headers=SSE
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = frames(parse_stream(response.text))
    types = [e.event for e in events]
    assert types[0] == "turn.started" and types[-1] == "turn.finished"
    assert types.count("tool.started") == 1 and types.count("tool.finished") == 1
    assert types.count("text.delta") == 3
    run_id = events[0].data["run_id"]
    last_seq = 0
    for event in events:
        assert event.data["type"] == event.event
        assert event.data["run_id"] == run_id
        assert event.data["seq"] >= last_seq
        last_seq = event.data["seq"]
        if event.event == "message":
            assert event.id == str(event.data["seq"]) == str(event.data["message"]["seq"])
        else:
            assert event.id is None
    messages = [e.data["message"] for e in events if e.event == "message"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    tool = next(e.data for e in events if e.event == "tool.finished")
    assert tool["name"] == "calculator" and tool["result"] == "2*(3+4) = 14"
    text = "".join(e.data["text"] for e in events if e.event == "text.delta")
    assert text == "It is 14."
    finished = events[-1].data
    assert finished["stop_reason"] == "end_turn" and finished["metrics"]["model_calls"] == 2
    stored = (await client.get(f"/v1/conversations/{conversation_id}/messages")).json()
    assert stored["messages"] == messages


async def test_client_message_id_is_echoed(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(text_step("hi"))
    response = await client.post(
        f"/v1/conversations/{conversation_id}/turns",
        json={"text": "hello", "client_message_id": "c-1"},
        headers=SSE,
    )
    user = next(e.data for e in parse_stream(response.text) if e.event == "message")
    assert user["client_message_id"] == "c-1"
    assert user["message"]["metadata"]["client_message_id"] == "c-1"


async def test_a_client_that_leaves_does_not_stop_the_turn(
    app: FastAPI, runtime: Runtime, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(Step(text_step("still here").events, delay=0.05))
    async with open_stream(
        app,
        "POST",
        f"/v1/conversations/{conversation_id}/turns",
        headers={**SSE, "content-type": "application/json"},
        body=b'{"text": "hi"}',
    ) as stream:
        assert stream.status == 200
        assert (await stream.next_frame()).event == "turn.started"
    assert runtime.bus.subscriber_count(conversation_id) == 0
    for _ in range(100):
        turns = await runtime.store.list_turns(conversation_id)
        if turns and turns[0].status == "finished":
            break
        await asyncio.sleep(0.02)
    assert turns[0].stop_reason == "end_turn"
    rows = await runtime.store.list_messages(conversation_id)
    assert rows[-1].text == "still here"


async def test_bad_turn_requests_are_422(client: httpx.AsyncClient, conversation_id: str) -> None:
    url = f"/v1/conversations/{conversation_id}/turns"
    json_type = {"content-type": "application/json"}
    cases: list[tuple[bytes, dict[str, str], str]] = [
        (b'{"text": "unterminated', json_type, "not valid JSON"),
        (b"", json_type, "a JSON body is required"),
        (b"{}", json_type, "text is required"),
        (b'{"text": ""}', json_type, "text must not be empty"),
        (b'{"text": "   "}', json_type, "text must not be empty"),
        (b'{"text": 5}', json_type, "text: input should be a valid string"),
        (b'{"text": null}', json_type, "text must not be null"),
        (b'{"text": "hi", "client_message_id": 7}', json_type, "client_message_id"),
        (b'{"text": "hi", "txt": "x"}', json_type, "txt is not a known field"),
        (b'["hi"]', json_type, "JSON object"),
        (b'{"text": "hi"}', {}, "Content-Type: application/json"),
    ]
    for accept in ({}, SSE):
        for raw, headers, expected in cases:
            response = await client.post(url, content=raw, headers={**headers, **accept})
            assert response.status_code == 422, raw
            assert response.headers["content-type"] == "application/json"
            error = response.json()["error"]
            assert error["code"] == "invalid_request"
            assert expected in error["message"], (raw, error["message"])


async def test_unknown_conversation_is_404_for_both_kinds(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    for headers in ({}, SSE):
        response = await client.post(
            "/v1/conversations/nope/turns", json={"text": "hi"}, headers=headers
        )
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert runtime.bus.subscriber_count("nope") == 0


async def test_the_model_chooser_picks_the_model_per_request(runtime: Runtime) -> None:
    other = ScriptedModel([text_step("from the other model")])

    def choose(request: Request) -> Model | None:
        return other if request.headers.get("x-ostinato-model") == "other" else None

    app = create_app(runtime, choose_model=choose)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        cid = (await client.post("/v1/conversations")).json()["id"]
        response = await client.post(
            f"/v1/conversations/{cid}/turns",
            json={"text": "hi"},
            headers={"x-ostinato-model": "other"},
        )
    assert response.json()["messages"][-1]["blocks"][0]["text"] == "from the other model"
    other.assert_consumed()


async def test_error_messages_read_as_sentences(
    client: httpx.AsyncClient, conversation_id: str
) -> None:
    url = f"/v1/conversations/{conversation_id}/turns"
    empty = (await client.post(url, json={"text": ""})).json()["error"]
    assert empty["message"] == "text must not be empty"
    assert empty["details"] == [
        {"loc": ["body", "text"], "type": "value_error", "message": "text must not be empty"}
    ]
    missing = (await client.post(url, json={})).json()["error"]
    assert missing["message"] == "text is required (or tool_response, to answer a question card)"


async def test_a_posted_message_reads_its_conversation_once_to_submit_it(
    client: httpx.AsyncClient,
    runtime: Runtime,
    model: ScriptedModel,
    conversation_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The owner's check reads the conversation; submitting the message reads it no
    second time (the turn reads it afresh, with its window, as it begins: two reads in
    all)."""
    reads: list[str] = []
    read, with_window = runtime.store.get_conversation, runtime.store.conversation_and_window

    async def counted(cid: str) -> Any:
        reads.append(cid)
        return await read(cid)

    async def counted_with_window(cid: str, **kw: Any) -> Any:
        reads.append(cid)
        monkeypatch.setattr(runtime.store, "get_conversation", read)  # (its own way)
        try:
            return await with_window(cid, **kw)
        finally:
            monkeypatch.setattr(runtime.store, "get_conversation", counted)

    monkeypatch.setattr(runtime.store, "get_conversation", counted)
    monkeypatch.setattr(runtime.store, "conversation_and_window", counted_with_window)
    model.add(text_step("Hi."))
    response = await client.post(f"/v1/conversations/{conversation_id}/turns", json={"text": "hi"})
    assert response.status_code == 200 and response.json()["stop_reason"] == "end_turn"
    assert reads == [conversation_id, conversation_id]
    missing = await client.post("/v1/conversations/nope/turns", json={"text": "hi"})
    assert missing.status_code == 404
