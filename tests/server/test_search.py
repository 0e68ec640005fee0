"""``/v1/search`` and the conversation list's archive and pins: the caller's hits with
where they are and a marked snippet, any text a valid query, archived conversations out
of the default list and searched still."""

from __future__ import annotations

import httpx

from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.server.routes import search as search_route
from ostinato.store.search import SEARCH_WINDOW
from tests.server.conftest import Callers


async def _say(client: httpx.AsyncClient, model: ScriptedModel, cid: str, text: str) -> None:
    model.add(text_step(f"noted: {text}"))
    response = await client.post(
        f"/v1/conversations/{cid}/turns", json={"text": text}, params={"wait": "true"}
    )
    assert response.status_code in (200, 201, 202), response.text


async def test_a_search_finds_the_row_and_marks_the_words(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    await _say(client, model, conversation_id, "the zebra crossing near the station")
    found = await client.get("/v1/search", params={"q": "zebra stat"})
    assert found.status_code == 200
    hits = found.json()["hits"]
    assert [(h["conversation_id"], h["role"]) for h in hits] == [
        (conversation_id, "user"),
        (conversation_id, "assistant"),
    ] or [(h["conversation_id"], h["role"]) for h in hits] == [
        (conversation_id, "assistant"),
        (conversation_id, "user"),
    ]
    user = next(h for h in hits if h["role"] == "user")
    assert user["seq"] == 1 and user["message_id"] and user["created_at"]
    assert [p["text"].lower() for p in user["snippet"] if p["match"]] == ["zebra", "station"]
    assert "zebra crossing" in "".join(p["text"] for p in user["snippet"])
    rows = (await client.get(f"/v1/conversations/{conversation_id}/messages")).json()
    assert any(r["seq"] == user["seq"] and r["id"] == user["message_id"] for r in rows["messages"])


async def test_any_query_text_is_answered(client: httpx.AsyncClient) -> None:
    for q in ['"', "NEAR(", "a AND", "*", ":*", "x" * 1000, "", "\x00", "(("]:
        response = await client.get("/v1/search", params={"q": q})
        assert response.status_code == 200, (q, response.text)
        assert response.json() == {"hits": []}
    too_long = await client.get("/v1/search", params={"q": "x" * 1001})
    assert too_long.status_code == 422
    assert "q" in too_long.json()["error"]["message"]
    missing = await client.get("/v1/search")
    assert missing.status_code == 422


async def test_each_caller_searches_their_own(callers: Callers, model: ScriptedModel) -> None:
    for who in (callers.ann, callers.bob):
        cid = (await who.post("/v1/conversations", json={"title": "Budget walrus"})).json()["id"]
        await _say(who, model, cid, "the walrus budget is approved")
        hits = (await who.get("/v1/search", params={"q": "walrus"})).json()["hits"]
        assert {h["conversation_id"] for h in hits} == {cid}
        assert len(hits) == 3  # the title, the person's row, the answer


async def test_archived_conversations_leave_the_list_and_stay_searchable(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    kept = (await client.post("/v1/conversations", json={"title": "kept"})).json()["id"]
    old = (await client.post("/v1/conversations", json={"title": "old narwhal"})).json()["id"]
    changed = await client.patch(f"/v1/conversations/{old}", json={"archived": True})
    assert changed.status_code == 200 and changed.json()["archived_at"]
    listed = (await client.get("/v1/conversations")).json()["conversations"]
    assert [c["id"] for c in listed] == [kept]
    archived = (await client.get("/v1/conversations", params={"archived": True})).json()
    assert [c["id"] for c in archived["conversations"]] == [old]
    (hit,) = (await client.get("/v1/search", params={"q": "narwhal"})).json()["hits"]
    assert hit["conversation_id"] == old and hit["archived"] and hit["seq"] is None
    back = await client.patch(f"/v1/conversations/{old}", json={"archived": False})
    assert back.json()["archived_at"] is None
    listed = (await client.get("/v1/conversations")).json()["conversations"]
    assert {c["id"] for c in listed} == {kept, old}


async def test_pin_rename_and_refusals(client: httpx.AsyncClient, conversation_id: str) -> None:
    path = f"/v1/conversations/{conversation_id}"
    pinned = await client.patch(path, json={"pinned": True, "title": "Pinned one"})
    assert pinned.json()["pinned"] is True and pinned.json()["title"] == "Pinned one"
    assert (await client.get(path)).json()["pinned"] is True
    (hit,) = (await client.get("/v1/search", params={"q": "pinned one"})).json()["hits"]
    assert hit["conversation_title"] == "Pinned one"
    for body in ({"pinned": None}, {"archived": "yes"}, {"pinned": 1}):
        refused = await client.patch(path, json=body)
        assert refused.status_code == 422, body
        assert refused.json()["error"]["code"] == "invalid_request"


def test_the_route_says_how_many_matches_are_ranked() -> None:
    assert f"{SEARCH_WINDOW:,}" in (search_route.search.__doc__ or "")
