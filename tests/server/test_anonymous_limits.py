"""Anonymous callers are bounded as a group (issue 25, item 4): before, each request
without a credential minted a new ``anon:`` owner, so per-owner limits never bound them
(30 fresh owners opened 30 streams where one owner is capped at 10), and an anonymous
caller could forge tools (whose trial run fetches pages) and connect MCP servers."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from ostinato.identity.settings import AnonymousLimits, AuthSettings, LimitSettings
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from tests.server.sse_client import open_stream

SECRET = "s" * 32


def _app(runtime: Runtime, anonymous: AnonymousLimits) -> FastAPI:
    limits = LimitSettings(anonymous=anonymous)
    settings = AuthSettings(mode="keys", allow_anonymous=True, secret=SECRET, limits=limits)
    return create_app(runtime, auth=settings)


@pytest.fixture
async def client(runtime: Runtime) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = _app(runtime, AnonymousLimits(new_per_minute=0, open_streams=5, turns_per_minute=4))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        yield app, client
    await app.state.ostinato.aclose()


async def _fresh(client: httpx.AsyncClient) -> tuple[dict[str, str], str]:
    """A new anonymous caller (no cookie kept): its token header and a conversation."""
    client.cookies.clear()
    made = await client.post("/v1/conversations")
    assert made.status_code == 201, made.text
    token = made.headers["x-ostinato-anonymous-token"]
    return {"authorization": f"Bearer {token}"}, made.json()["id"]


async def test_fresh_anonymous_owners_share_one_bound_on_streams(
    client: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, http = client
    opened = refused = 0
    async with contextlib.AsyncExitStack() as streams:
        for _ in range(12):
            headers, cid = await _fresh(http)
            stream = await streams.enter_async_context(
                open_stream(app, "GET", f"/v1/conversations/{cid}/events", headers=headers)
            )
            if stream.status == 200:
                opened += 1
            else:
                assert stream.status == 429
                refused += 1
    assert (opened, refused) == (5, 7)


async def test_fresh_anonymous_owners_share_one_bound_on_turns(
    client: tuple[FastAPI, httpx.AsyncClient], model: ScriptedModel
) -> None:
    _, http = client
    answers = []
    for i in range(6):
        headers, cid = await _fresh(http)
        model.add(text_step(f"answer {i}"))
        turn = await http.post(
            f"/v1/conversations/{cid}/turns", json={"text": "hi"}, headers=headers
        )
        answers.append(turn.status_code)
    assert answers == [200] * 4 + [429] * 2
    message = turn.json()["error"]["message"]
    assert "of all anonymous callers together" in message


async def test_one_address_gets_only_so_many_new_anonymous_owners(runtime: Runtime) -> None:
    app = _app(runtime, AnonymousLimits(new_per_minute=3))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        statuses = []
        for _ in range(5):
            http.cookies.clear()
            statuses.append((await http.post("/v1/conversations")).status_code)
        assert statuses == [201, 201, 201, 429, 429]
        refused = await http.post("/v1/conversations")
        assert "retry-after" in refused.headers
        assert refused.json()["error"]["code"] == "limit_exceeded"
    await app.state.ostinato.aclose()


async def test_anonymous_callers_cannot_forge_tools_or_connect_mcp_servers(
    client: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, http = client
    headers, _ = await _fresh(http)
    tool = {
        "name": "proxy",
        "description": "Fetch a page.",
        "parameters": {"type": "object"},
        "code": "async () => (await fetch('https://example.com')).text",
    }
    forged = await http.post("/v1/tools/forged", json=tool, headers=headers)
    assert forged.status_code == 403, forged.text
    assert forged.json()["error"]["code"] == "account_required"
    server = {"name": "mine", "url": "https://mcp.example.com/mcp"}
    connected = await http.post("/v1/mcp-servers", json=server, headers=headers)
    assert connected.status_code == 403 and "account_required" in connected.text
