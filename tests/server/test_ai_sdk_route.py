"""``POST /v1/ai-sdk/chat`` in memory: the chunks in order, a card answered by the tool
part's output, a typed "no" declining, bad bodies (tests/ai_sdk runs the real ``ai``)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from ostinato.models.scripted import ScriptedModel, text_step, tool_step

URL = "/v1/ai-sdk/chat"


def user(text: str, mid: str = "u1") -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}


def chunks(response: httpx.Response) -> list[dict[str, Any]]:
    events = [e[6:] for e in response.text.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


async def test_a_plain_turn_in_order(client: httpx.AsyncClient, model: ScriptedModel) -> None:
    model.add(text_step("Hi there.", chunks=2))
    response = await client.post(URL, json={"id": "c1", "messages": [user("hello")]})
    assert response.status_code == 200
    assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    got = [c["type"] for c in chunks(response)]
    assert got == [
        "start", "start-step", "text-start", "text-delta", "text-delta", "text-end",
        "finish-step", "finish",
    ]  # fmt: skip


async def test_a_card_is_answered_by_the_tool_parts_output(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    card = {"question": "Which?", "options": ["a", "b"]}
    model.add(tool_step(("ask_user", card), text="One question."), text_step("b it is."))
    first = chunks(await client.post(URL, json={"id": "c2", "messages": [user("pick")]}))
    asked = next(c for c in first if c["type"] == "data-ostinato-card")["data"]
    assert asked["input"] == card and first[-1] == {"type": "finish", "finishReason": "stop"}
    assistant = {
        "id": "msg-c2-1",
        "role": "assistant",
        "parts": [
            {"type": "dynamic-tool", "toolName": "ask_user", "toolCallId": asked["toolCallId"],
             "state": "output-available", "input": card, "output": "b"},
        ],
    }  # fmt: skip
    second = await client.post(URL, json={"id": "c2", "messages": [user("pick"), assistant]})
    said = [c["delta"] for c in chunks(second) if c["type"] == "text-delta"]
    assert said == ["b it is."]
    assert chunks(second)[0]["messageId"] == "msg-c2-1"


async def test_no_declines_a_waiting_call(client: httpx.AsyncClient, model: ScriptedModel) -> None:
    model.add(tool_step(("shell", {"command": "rm -rf x"})), text_step("Not done."))
    first = chunks(await client.post(URL, json={"id": "c3", "messages": [user("go")]}))
    assert first[-2]["type"] == "tool-approval-request"
    second = await client.post(URL, json={"id": "c3", "messages": [user("go"), user("no", "u2")]})
    got = chunks(second)
    assert {"type": "tool-output-denied", "toolCallId": first[-2]["toolCallId"]} in got


async def test_bad_bodies_are_422(client: httpx.AsyncClient) -> None:
    for body in (
        {"id": "c4", "messages": []},
        {"id": "not/a/path", "messages": [user("x")]},
        {"id": "c4", "messages": [user("x")], "trigger": "resume-stream"},
        {"messages": [user("x")]},
    ):
        response = await client.post(URL, json=body)
        assert response.status_code == 422, body
        assert response.json()["error"]["code"] == "invalid_request"
