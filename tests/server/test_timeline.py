"""``GET /v1/conversations/{id}/turns/{turn_id}``: a turn with its steps, each model call
and tool call with its start offset and duration."""

from __future__ import annotations

import httpx

from ostinato.models.base import Usage
from ostinato.models.scripted import ScriptedModel, text_step, tool_step


async def test_a_tool_turn_lists_each_step_with_its_calls(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(
        tool_step(("calculator", {"expression": "6*7"}), usage=Usage(30, 5)),
        text_step("42.", usage=Usage(40, 2)),
    )
    path = f"/v1/conversations/{conversation_id}"
    sent = (await client.post(f"{path}/turns", json={"text": "6*7?"})).json()
    response = await client.get(f"{path}/turns/{sent['turn_id']}")
    assert response.status_code == 200
    turn = response.json()
    assert turn["id"] == sent["turn_id"] and turn["run_id"] == sent["run_id"]
    assert turn["stop_reason"] == "end_turn" and turn["status"] == "finished"
    assert turn["metrics"]["model_calls"] == 2 and turn["metrics"]["model"] == model.name
    steps = turn["steps"]
    assert [s["index"] for s in steps] == [1, 2]  # nothing before the first model call
    first, second = steps
    [call] = first["model_calls"]
    assert call["purpose"] == "step" and call["model"] == model.name
    assert (call["tokens_in"], call["tokens_out"]) == (30, 5)
    assert call["time_to_first_token_s"] is not None and call["error"] is None
    [tool] = first["tool_calls"]
    assert tool["name"] == "calculator" and tool["status"] == "ok"
    assert tool["start_s"] >= call["start_s"] + call["duration_s"]  # after the reply
    assert second["start_s"] >= tool["start_s"] and second["tool_calls"] == []
    assert second["model_calls"][0]["stop_reason"] == "end_turn"
    for step in steps:
        assert step["duration_s"] >= 0
    assert turn["duration_s"] >= second["start_s"] and turn["after_turn"] == []


async def test_unknown_or_foreign_turns_are_404(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(text_step("hi"))
    sent = (
        await client.post(f"/v1/conversations/{conversation_id}/turns", json={"text": "hi"})
    ).json()
    other = (await client.post("/v1/conversations", json={})).json()["id"]
    for path in (
        f"/v1/conversations/{conversation_id}/turns/nope",
        f"/v1/conversations/{other}/turns/{sent['turn_id']}",  # a turn of another conversation
        f"/v1/conversations/nope/turns/{sent['turn_id']}",
    ):
        response = await client.get(path)
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "not_found"
