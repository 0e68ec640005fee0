"""``/v1/conversations/{id}/messages``: stored rows in seq order, paged by seq."""

from __future__ import annotations

import httpx

from ostinato.models.scripted import ScriptedModel, text_step, tool_step


async def _two_turns(client: httpx.AsyncClient, model: ScriptedModel, cid: str) -> None:
    model.add(
        tool_step(("calculator", {"expression": "2*(3+4)"})),
        text_step("It is 14."),
        text_step("Bye."),
    )
    for text in ("what is 2*(3+4)?", "thanks"):
        response = await client.post(f"/v1/conversations/{cid}/turns", json={"text": text})
        assert response.status_code == 200


async def test_rows_in_seq_order_with_their_fields(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    await _two_turns(client, model, conversation_id)
    response = await client.get(f"/v1/conversations/{conversation_id}/messages")
    assert response.status_code == 200
    rows = response.json()["messages"]
    assert [r["seq"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [r["role"] for r in rows] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    for row in rows:
        assert {"seq", "role", "blocks", "created_at", "id", "turn_id"} <= row.keys()
    assert rows[0]["blocks"] == [{"type": "text", "text": "what is 2*(3+4)?"}]
    assert rows[1]["blocks"][0]["type"] == "tool_use"
    assert rows[2]["blocks"][0]["type"] == "tool_result"
    assert rows[2]["blocks"][0]["content"] == "2*(3+4) = 14"
    assert response.json()["next_after_seq"] is None


async def test_after_seq_and_limit_page_through_the_rows(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    await _two_turns(client, model, conversation_id)
    url = f"/v1/conversations/{conversation_id}/messages"
    page = (await client.get(url, params={"after_seq": 2, "limit": 3})).json()
    assert [r["seq"] for r in page["messages"]] == [3, 4, 5]
    assert page["next_after_seq"] == 5
    rest = (await client.get(url, params={"after_seq": 5, "limit": 3})).json()
    assert [r["seq"] for r in rest["messages"]] == [6]
    assert rest["next_after_seq"] is None
    assert (await client.get(url, params={"after_seq": 99})).json()["messages"] == []


async def test_newest_reads_the_newest_rows_and_says_whether_older_ones_exist(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    await _two_turns(client, model, conversation_id)
    url = f"/v1/conversations/{conversation_id}/messages"
    tail = (await client.get(url, params={"newest": 3, "include_hidden": True})).json()
    assert [r["seq"] for r in tail["messages"]] == [4, 5, 6]
    assert tail["older"] is True and tail["next_after_seq"] is None
    everything = (await client.get(url, params={"newest": 50})).json()
    assert [r["seq"] for r in everything["messages"]] == [1, 2, 3, 4, 5, 6]
    assert everything["older"] is False
    paged = (await client.get(url, params={"after_seq": 2})).json()
    assert paged["older"] is False  # only `newest` answers it
    # with after_seq as well: the newest rows after it (schemathesis: a 422 before)
    for after, seqs, older in ((2, [4, 5, 6], True), (3, [4, 5, 6], False), (4, [5, 6], False)):
        both = (await client.get(url, params={"newest": 3, "after_seq": after})).json()
        assert [r["seq"] for r in both["messages"]] == seqs and both["older"] is older, after
    for bad in (0, 1001):
        assert (await client.get(url, params={"newest": bad})).status_code == 422


async def test_bad_parameters_are_422_and_unknown_conversation_404(
    client: httpx.AsyncClient, conversation_id: str
) -> None:
    url = f"/v1/conversations/{conversation_id}/messages"
    for params in ({"after_seq": "-1"}, {"after_seq": "x"}, {"limit": "0"}, {"limit": "y"}):
        response = await client.get(url, params=params)
        assert response.status_code == 422, params
        assert response.json()["error"]["code"] == "invalid_request"
        assert next(iter(params)) in response.json()["error"]["message"]
    missing = await client.get("/v1/conversations/nope/messages")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
