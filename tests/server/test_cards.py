"""Question cards over HTTP: a ui tool pauses the turn (``input.requested``), a
``tool_response`` resumes it, a stale id is a 409 that names the card waiting, and plain
text dismisses the card."""

from __future__ import annotations

import json

import httpx

from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from tests.server.sse_client import frames, parse_stream

SSE = {"accept": "text/event-stream"}
ASK = ("ask_user", {"question": "Which colour?", "options": ["red", "blue"]}, "card1")


async def test_a_card_pauses_resumes_refuses_a_stale_id_and_is_dismissed_by_text(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    url = f"/v1/conversations/{conversation_id}/turns"
    model.add(tool_step(ASK, text="Let me ask."))
    paused = frames(
        parse_stream((await client.post(url, json={"text": "paint"}, headers=SSE)).text)
    )
    card = next(e.data for e in paused if e.event == "input.requested")
    assert card["tool_use_id"] == "card1" and card["input"]["options"] == ["red", "blue"]
    assert paused[-1].data["stop_reason"] == "paused" and paused[-1].data["state"] == "paused"
    assert (await client.get(f"/v1/conversations/{conversation_id}")).json()["state"] == "paused"

    wrong = await client.post(url, json={"tool_response": {"tool_use_id": "nope", "result": 1}})
    assert wrong.status_code == 409
    assert wrong.json()["error"]["code"] == "conflict"
    assert "'card1'" in wrong.json()["error"]["message"]  # says which card is waiting

    model.add(text_step("Blue it is."))
    answer = {"tool_response": {"tool_use_id": "card1", "result": {"choice": "blue"}}}
    resumed = frames(parse_stream((await client.post(url, json=answer, headers=SSE)).text))
    assert resumed[0].event == "turn.started" and resumed[0].data["kind"] == "resume"
    rows = [e.data["message"] for e in resumed if e.event == "message"]
    assert rows[0]["role"] == "tool"
    assert json.loads(rows[0]["blocks"][0]["content"]) == {"choice": "blue"}
    assert resumed[-1].data["stop_reason"] == "end_turn"

    stale = await client.post(url, json=answer)
    assert stale.status_code == 409
    assert "no question card" in stale.json()["error"]["message"]

    model.add(tool_step(("ask_user", {"question": "Size?"}, "card2")), text_step("Sure."))
    assert (await client.post(url, json={"text": "and the size"})).json()["stop_reason"] == "paused"
    typed = (await client.post(url, json={"text": "never mind"})).json()  # JSON: waits
    assert typed["stop_reason"] == "end_turn"
    dismissal = typed["messages"][0]
    assert dismissal["role"] == "tool"
    assert json.loads(dismissal["blocks"][0]["content"]) == {
        "dismissed": True,
        "user_message": "never mind",
    }
    assert [m["role"] for m in typed["messages"]] == ["tool", "user", "assistant"]
    model.assert_consumed()


async def test_a_card_answer_as_json_returns_the_resumed_turn(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    url = f"/v1/conversations/{conversation_id}/turns"
    model.add(tool_step(ASK), text_step("Red."))
    await client.post(url, json={"text": "paint"})
    body = (
        await client.post(url, json={"tool_response": {"tool_use_id": "card1", "result": "red"}})
    ).json()
    assert body["stop_reason"] == "end_turn" and body["queued_position"] is None
    assert [m["role"] for m in body["messages"]] == ["tool", "assistant"]
    assert body["messages"][0]["blocks"][0]["content"] == "red"


async def test_bad_card_answers_are_422(client: httpx.AsyncClient, conversation_id: str) -> None:
    url = f"/v1/conversations/{conversation_id}/turns"
    cases: list[tuple[object, str]] = [
        ({"text": "hi", "tool_response": {"tool_use_id": "a", "result": 1}}, "not both"),
        ({"tool_response": {"tool_use_id": "a"}}, "tool_response.result is required"),
        ({"tool_response": {"result": 1}}, "tool_response.tool_use_id is required"),
        ({"tool_response": {"tool_use_id": "", "result": 1}}, "tool_use_id"),
        ({"tool_response": {"tool_use_id": "a", "result": 1, "x": 2}}, "x is not a known field"),
        (
            {"tool_response": {"tool_use_id": "a", "result": 1}, "client_message_id": "c"},
            "client_message_id goes with text",
        ),
        ({"tool_response": {"tool_use_id": "a", "result": 1}, "policy": "reject"}, "policy"),
        ({"text": "hi", "policy": "later"}, "policy"),
        ({"text": "hi", "cancel_on_disconnect": "yes"}, "cancel_on_disconnect"),
    ]
    for body, expected in cases:
        response = await client.post(url, json=body)
        assert response.status_code == 422, body
        assert expected in response.json()["error"]["message"], (body, response.json())
