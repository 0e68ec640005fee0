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


async def test_integers_are_bounded_by_their_columns(
    client: httpx.AsyncClient, conversation_id: str
) -> None:
    base = f"/v1/conversations/{conversation_id}"
    for value in ("2147483648", "9223372036854775808", "-1"):
        for path in (f"{base}/messages", f"{base}/events"):
            response = await client.get(path, params={"after_seq": value})
            assert response.status_code == 422, (path, value, response.text)
            assert "after_seq" in response.json()["error"]["message"]
        header = await client.get(f"{base}/events", headers={"last-event-id": value})
        assert header.status_code == 422 and "Last-Event-ID" in header.text
    top = await client.get(f"{base}/messages", params={"after_seq": "2147483647"})
    assert top.status_code == 200 and top.json()["messages"] == []
    decision = {"decision": "approve", "remember": "exact", "expires_in_s": 1e300}
    huge = await client.post(f"{base}/approvals/a1", json=decision)
    assert huge.status_code == 422 and "expires_in_s" in huge.json()["error"]["message"]


async def test_a_multipart_turn_is_checked_like_its_schema(
    client: httpx.AsyncClient, conversation_id: str
) -> None:
    url = f"/v1/conversations/{conversation_id}/turns"
    blank = await client.post(url, files={"text": (None, "")})  # multipart, no files
    assert blank.status_code == 422 and "text" in blank.json()["error"]["message"]
    one = {"files": ("a.txt", b"x", "text/plain")}
    flag = await client.post(url, data={"text": "hi", "cancel_on_disconnect": "{}"}, files=one)
    assert flag.status_code == 422 and "cancel_on_disconnect" in flag.text
    many = [("files", (f"{i}.txt", b"x", "text/plain")) for i in range(11)]
    eleven = await client.post(url, data={"text": "hi"}, files=many)
    assert eleven.status_code == 422 and "at most 10" in eleven.json()["error"]["message"]


async def test_a_fact_with_a_nul_is_a_422(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/memories", json={"fact": "tea\u0000"})
    assert response.status_code == 422 and "NUL" in response.json()["error"]["message"]


async def test_a_405_on_a_fixed_path_names_its_own_methods(client: httpx.AsyncClient) -> None:
    """/v1/tools/forged is its own resource, not a tool named "forged" of /v1/tools/{name}
    (schemathesis: ``Allow`` advertised PUT there)."""
    for path, allowed in (
        ("/v1/tools/forged", "GET, HEAD, POST"),
        ("/v1/tools/sources", "GET, HEAD"),
        ("/v1/memories/conflicts", "GET, HEAD"),
    ):
        response = await client.options(path)
        assert response.status_code == 405
        assert response.headers["allow"] == allowed, path


async def test_the_protocol_routes_document_their_bodies(client: httpx.AsyncClient) -> None:
    """An empty body to the AI SDK route is a 422 the document names (it named only 200),
    and both protocol routes say their body is required."""
    document = (await client.get("/openapi.json")).json()
    for path in ("/v1/ai-sdk/chat", "/v1/chat/completions"):
        operation = document["paths"][path]["post"]
        assert operation["requestBody"]["required"] is True
    assert "422" in document["paths"]["/v1/ai-sdk/chat"]["post"]["responses"]
    assert (await client.post("/v1/ai-sdk/chat")).status_code == 422


async def test_a_forged_tool_name_the_schema_allows_is_one_the_server_takes(
    client: httpx.AsyncClient,
) -> None:
    """The schema said any name of 1 to 64 characters; the server takes only a lower-case
    name (schemathesis: "0" was schema-valid and refused)."""
    document = (await client.get("/openapi.json")).json()
    name = document["components"]["schemas"]["ForgeRequest"]["properties"]["name"]
    assert name["pattern"] == "^(my_)?[a-z][a-z0-9_]{0,40}$"


async def test_a_nul_in_a_conversation_id_is_refused_not_a_500(
    client: httpx.AsyncClient,
) -> None:
    """PostgreSQL cannot hold (or compare) a NUL: schemathesis found a 500 on PUT
    /v1/tools/{name} with one in ``conversation_id``; every engine refuses it."""
    switch = await client.put(
        "/v1/tools/clock", json={"enabled": False, "conversation_id": "a\x00"}
    )
    assert switch.status_code == 422
    read = await client.get("/v1/conversations/a%00b/messages")
    assert read.status_code == 404
    page = await client.get("/v1/conversations", params={"before": "a\x00"})
    assert page.status_code == 422
    tools = await client.get("/v1/tools", params={"conversation_id": "a\x00"})
    assert tools.status_code == 422
