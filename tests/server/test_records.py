"""``/turns``, ``/tool-calls`` and ``/queue`` (GET): what a reloaded page reads besides
the rows: how each turn ended, how each tool call ran, what waits in the queue."""

from __future__ import annotations

import httpx

from ostinato.models.base import TextDelta
from ostinato.models.scripted import ScriptedModel, Step, text_step, tool_step
from ostinato.runtime import Runtime


async def test_turns_say_how_each_turn_ended(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(tool_step(("calculator", {"expression": "6*7"})), text_step("42."))
    sent = await client.post(f"/v1/conversations/{conversation_id}/turns", json={"text": "6*7?"})
    assert sent.status_code == 200
    response = await client.get(f"/v1/conversations/{conversation_id}/turns")
    assert response.status_code == 200
    [turn] = response.json()["turns"]
    assert turn["id"] == sent.json()["turn_id"] and turn["run_id"] == sent.json()["run_id"]
    assert turn["status"] == "finished" and turn["stop_reason"] == "end_turn"
    assert turn["kind"] == "user" and turn["error"] is None
    assert turn["metrics"]["tools"] == {"calculator": 1}

    calls = (await client.get(f"/v1/conversations/{conversation_id}/tool-calls")).json()
    [call] = calls["tool_calls"]
    assert call["name"] == "calculator" and call["status"] == "ok"
    assert call["input"] == {"expression": "6*7"} and call["result"] == "6*7 = 42"
    assert call["turn_id"] == turn["id"] and call["duration_s"] >= 0 and not call["is_error"]


async def test_queue_lists_messages_waiting_behind_a_turn(
    client: httpx.AsyncClient, model: ScriptedModel, runtime: Runtime, conversation_id: str
) -> None:
    # a slow first reply (cancelled once the queue was read), then the second's
    model.add(Step(tuple(TextDelta("w ") for _ in range(600)), delay=0.05), text_step("second"))
    path = f"/v1/conversations/{conversation_id}"
    first = await runtime.submit(conversation_id, "one")
    await first.handle()
    second = await runtime.submit(conversation_id, "two", client_message_id="c2")
    assert second.queued is not None
    [queued] = (await client.get(f"{path}/queue")).json()["queued"]
    assert queued["id"] == second.queued.id and queued["position"] == second.queued.position
    assert queued["text"] == "two" and queued["client_message_id"] == "c2"
    assert (await client.post(f"{path}/cancel")).status_code == 200
    assert (await (await second.handle()).result()).stop_reason == "end_turn"
    assert (await client.get(f"{path}/queue")).json() == {"queued": []}


async def test_unknown_conversation_is_404(client: httpx.AsyncClient) -> None:
    for what in ("turns", "tool-calls", "queue"):
        response = await client.get(f"/v1/conversations/nope/{what}")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
