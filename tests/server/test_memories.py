"""``/v1/memories`` through the ASGI app, on every store engine: each caller (a key of
ann's, a key of bob's) sees and changes only their own facts."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from ostinato.memory.facts import Memory
from ostinato.runtime import Runtime
from ostinato.store.base import MEMORY_CAPACITY
from tests.server.conftest import Callers


async def post(client: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await client.post("/v1/memories", json=body)


def error(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()["error"]
    return body


async def test_remember_list_search_forget(callers: Callers) -> None:
    created = await post(callers.ann, fact="Ann drinks green tea", subject=" Drinks ")
    assert created.status_code == 201
    tea = created.json()
    assert tea["owner"] == "ann" and tea["fact"] == "Ann drinks green tea"
    assert tea["subject"] == "drinks" and tea["current"] and tea["valid_to"] is None
    assert tea["score"] is None
    other = (await post(callers.ann, fact="Ann's cat is called Miso")).json()
    await post(callers.bob, fact="Bob drinks tea")

    listed = await callers.ann.get("/v1/memories")
    assert listed.status_code == 200
    assert [m["id"] for m in listed.json()["memories"]] == [other["id"], tea["id"]]

    found = await callers.ann.get("/v1/memories", params={"q": "tea"})
    (hit,) = found.json()["memories"]
    assert hit["id"] == tea["id"] and hit["score"] is not None

    forgotten = await callers.ann.delete(f"/v1/memories/{tea['id']}")
    assert forgotten.status_code == 200
    closed = forgotten.json()
    assert closed["id"] == tea["id"] and not closed["current"] and closed["valid_to"]
    assert (await callers.ann.get("/v1/memories", params={"q": "tea"})).json() == {"memories": []}
    history = await callers.ann.get("/v1/memories", params={"include_closed": "true"})
    assert {m["id"] for m in history.json()["memories"]} == {tea["id"], other["id"]}
    again = await callers.ann.delete(f"/v1/memories/{tea['id']}")
    assert again.status_code == 200 and again.json() == closed


async def test_supersede(callers: Callers) -> None:
    old = (await post(callers.ann, fact="Ann lives in Porto")).json()
    new = await post(callers.ann, fact="Ann lives in Lisbon", supersedes=old["id"])
    assert new.status_code == 201 and new.json()["supersedes"] == old["id"]
    history = (await callers.ann.get("/v1/memories", params={"include_closed": True})).json()[
        "memories"
    ]
    closed = next(m for m in history if m["id"] == old["id"])
    assert closed["superseded_by"] == new.json()["id"] and not closed["current"]
    again = await post(callers.ann, fact="Ann lives in Faro", supersedes=old["id"])
    assert again.status_code == 409 and error(again)["code"] == "conflict"
    unknown = await post(callers.ann, fact="x", supersedes="nope")
    assert unknown.status_code == 404 and error(unknown)["code"] == "not_found"


async def test_unknown_and_other_owners_memories_are_404(callers: Callers) -> None:
    bobs = (await post(callers.bob, fact="Bob drinks tea")).json()
    for client, memory_id in (
        (callers.ann, bobs["id"]),
        (callers.bob, "missing"),
        (callers.bob, "x" * 500),
    ):
        response = await client.delete(f"/v1/memories/{memory_id}")
        assert response.status_code == 404, memory_id
        assert error(response)["code"] == "not_found"
        assert "no memory" in error(response)["message"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "fact"),
        ({"fact": ""}, "fact"),
        ({"fact": "x" * 2_001}, "fact"),
        ({"owner": "ann", "fact": "x"}, "owner"),  # the owner is the caller, never named
        ({"fact": "x", "extra": 1}, "extra"),
        ({"fact": 5}, "fact"),
        ({"fact": "x", "subject": "s" * 201}, "subject"),
    ],
)
async def test_bad_bodies_are_422(
    client: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    response = await client.post("/v1/memories", json=body)
    assert response.status_code == 422
    assert error(response)["code"] == "invalid_request"
    assert field in error(response)["message"]


async def test_blank_fact_bad_json_and_bad_queries_are_422(client: httpx.AsyncClient) -> None:
    blank = await post(client, fact="   ")
    assert blank.status_code == 422 and "needs some text" in error(blank)["message"]
    broken = await client.post(
        "/v1/memories", content=b"{", headers={"content-type": "application/json"}
    )
    assert broken.status_code == 422 and "not valid JSON" in error(broken)["message"]
    bad_queries: list[dict[str, str | int]] = [
        {"limit": 0},
        {"limit": "many"},
        {"include_closed": "perhaps"},
    ]
    for params in bad_queries:
        response = await client.get("/v1/memories", params=params)
        assert response.status_code == 422, params
        assert error(response)["code"] == "invalid_request"


@pytest.mark.parametrize("q", ['"', "NEAR(", "tea*", "-tea", ":", "", "   ", "' OR 1=1 --"])
async def test_any_search_text_is_safe(client: httpx.AsyncClient, q: str) -> None:
    await post(client, fact="Ann drinks tea")
    response = await client.get("/v1/memories", params={"q": q})
    assert response.status_code == 200
    assert all(m["fact"] == "Ann drinks tea" for m in response.json()["memories"])


async def test_a_full_memory_is_409(callers: Callers, runtime: Runtime) -> None:
    runtime.memory = Memory(runtime.store, capacity=2)  # the setting memory.capacity
    for i in range(2):
        assert (await post(callers.ann, fact=f"fact {i}")).status_code == 201
    full = await post(callers.ann, fact="one too many")
    assert full.status_code == 409
    assert error(full) == {
        "code": "memory_full",
        "message": "memory is full: 2 of 2 facts; forget some first",
    }
    assert (await post(callers.bob, fact="fits")).status_code == 201
    assert MEMORY_CAPACITY == 5_000


async def test_the_routes_are_in_the_openapi_document(client: httpx.AsyncClient) -> None:
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert set(paths["/v1/memories"]) == {"get", "post"}
    assert "409" in paths["/v1/memories"]["post"]["responses"]
    assert set(paths["/v1/memories/{memory_id}"]) == {"delete"}


async def test_nul_characters_are_refused_not_a_500(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/memories", json={"fact": "a\x00b"})
    assert response.status_code == 422
    # a subject's control characters are spaces; an id with a NUL names no memory
    made = await client.post("/v1/memories", json={"fact": "x", "subject": "s\x00"})
    assert made.status_code == 201 and made.json()["subject"] == "s"
    unknown = await client.post("/v1/memories", json={"fact": "y", "supersedes": "a\x00"})
    assert unknown.status_code == 404
    found = await client.get("/v1/memories", params={"q": "tea\x00"})
    assert found.status_code == 200
    forgotten = await client.delete("/v1/memories/a%00b")
    assert forgotten.status_code == 404
