"""What the OpenAPI document promises, the server does: the cases schemathesis found
(a 500 on a huge integer, 422s for schema-valid requests, an undocumented 400, an
``Allow`` header naming one method of several)."""

from __future__ import annotations

import httpx


async def test_a_405_allows_every_method_of_the_path(client: httpx.AsyncClient) -> None:
    response = await client.delete("/v1/conversations")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD, POST"
    assert response.json()["error"]["code"] == "method_not_allowed"
    memories = await client.put("/v1/memories")
    assert memories.headers["allow"] == "GET, HEAD, POST"
    one = await client.post("/v1/conversations/c1/messages")
    assert one.headers["allow"] == "GET, HEAD"


async def test_a_body_that_is_not_utf8_is_a_422_saying_so(
    client: httpx.AsyncClient, conversation_id: str
) -> None:
    headers = {"content-type": "application/json"}
    for path in (
        "/v1/conversations",
        f"/v1/conversations/{conversation_id}/approvals/a1",
        "/v1/memories",
        "/v1/tools/clock",
        f"/v1/conversations/{conversation_id}/turns",
    ):
        method = "PUT" if path.startswith("/v1/tools") else "POST"
        response = await client.request(method, path, content=b'{"title": "\xff"}', headers=headers)
        assert response.status_code == 422, (path, response.text)
        error = response.json()["error"]
        assert error["code"] == "invalid_request"
        assert "not valid JSON" in error["message"]


async def test_a_body_nested_too_deeply_is_a_422(client: httpx.AsyncClient) -> None:
    deep = b'{"metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    response = await client.post(
        "/v1/conversations", content=deep, headers={"content-type": "application/json"}
    )
    assert response.status_code in (413, 422)  # over the metadata limit, or too deep
    small_deep = b'{"metadata": {"a": ' + b"[" * 5000 + b"]" * 5000 + b"}}"
    response = await client.post(
        "/v1/memories", content=small_deep, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
