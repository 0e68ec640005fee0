"""``/v1/conversations``: create, read, list with keyset paging."""

from __future__ import annotations

import httpx


async def test_create_with_an_empty_body(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/conversations")
    assert response.status_code == 201
    body = response.json()
    assert body["state"] == "idle"
    assert body["id"] and body["created_at"]


async def test_create_with_title_and_metadata_then_read_it(client: httpx.AsyncClient) -> None:
    created = await client.post(
        "/v1/conversations", json={"title": "Sums", "metadata": {"source": "test"}}
    )
    assert created.status_code == 201
    cid = created.json()["id"]
    read = await client.get(f"/v1/conversations/{cid}")
    assert read.status_code == 200
    assert read.json()["title"] == "Sums"
    assert read.json()["metadata"] == {"source": "test"}
    assert read.json()["created_at"] == created.json()["created_at"]


async def test_unknown_conversation_is_404(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/conversations/nope")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert "nope" in response.json()["error"]["message"]


async def test_list_pages_newest_first(client: httpx.AsyncClient) -> None:
    ids = {(await client.post("/v1/conversations")).json()["id"] for _ in range(5)}
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params: dict[str, str | int] = {"limit": 2}
        if cursor:
            params["before"] = cursor
        page = (await client.get("/v1/conversations", params=params)).json()
        pages += 1
        seen += [c["id"] for c in page["conversations"]]
        cursor = page["next"]
        if cursor is None:
            break
    assert pages == 3
    assert set(seen) == ids and len(seen) == 5
    assert seen == sorted(seen, reverse=True)


async def test_a_full_last_page_has_no_next_cursor(client: httpx.AsyncClient) -> None:
    for _ in range(2):
        await client.post("/v1/conversations")
    page = (await client.get("/v1/conversations", params={"limit": 2})).json()
    assert len(page["conversations"]) == 2
    assert page["next"] is None


async def test_bad_create_bodies_are_422(client: httpx.AsyncClient) -> None:
    cases = [
        (b"{not json", "not valid JSON"),
        (b'{"title": 5}', "title"),
        (b'{"colour": "red"}', "colour is not a known field"),
        (b"[1, 2]", "JSON object"),
    ]
    for raw, expected in cases:
        response = await client.post(
            "/v1/conversations", content=raw, headers={"content-type": "application/json"}
        )
        assert response.status_code == 422, raw
        error = response.json()["error"]
        assert error["code"] == "invalid_request"
        assert expected in error["message"], (raw, error["message"])


async def test_bad_list_parameters_are_422(client: httpx.AsyncClient) -> None:
    for params in ({"limit": "0"}, {"limit": "many"}, {"limit": "1000"}):
        response = await client.get("/v1/conversations", params=params)
        assert response.status_code == 422, params
        assert "query limit" in response.json()["error"]["message"]
