"""What a browser may do: CORS off by default and an allow-list when configured; no
state-changing request from another site's page; the Host check of a loopback server in
mode ``none``; anonymous callers, their cookie, and the CSRF header a cookie needs."""

from __future__ import annotations

import httpx
import pytest

from ostinato.identity.settings import AuthSettings
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.server.auth.cookies import ANONYMOUS_COOKIE, ANONYMOUS_TOKEN_HEADER, CSRF_COOKIE
from ostinato.store.base import Store
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry


def _client(app: object, **headers: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),  # type: ignore[arg-type]
        base_url="http://127.0.0.1:8000",
        headers=headers,
    )


@pytest.mark.parametrize("store", ["memory"], indirect=True)
async def test_cors_is_off_by_default_and_lists_only_allowed_origins(runtime: Runtime) -> None:
    preflight = {
        "origin": "https://chat.example.com",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type",
    }
    async with _client(create_app(runtime, allowed_origins=[])) as client:
        response = await client.options("/v1/conversations", headers=preflight)
        assert "access-control-allow-origin" not in response.headers
    app = create_app(runtime, allowed_origins=["https://chat.example.com"])
    async with _client(app) as client:
        allowed = await client.options("/v1/conversations", headers=preflight)
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == "https://chat.example.com"
        assert allowed.headers["access-control-allow-credentials"] == "true"
        other = await client.options(
            "/v1/conversations", headers={**preflight, "origin": "https://evil.example"}
        )
        assert other.headers.get("access-control-allow-origin") != "https://evil.example"


@pytest.mark.parametrize("store", ["memory"], indirect=True)
async def test_another_sites_page_cannot_change_anything(runtime: Runtime) -> None:
    app = create_app(runtime, allowed_origins=["https://chat.example.com"])
    async with _client(app) as client:
        for origin in ("https://evil.example", "http://127.0.0.1:9999", "null"):
            response = await client.post("/v1/conversations", headers={"origin": origin})
            assert response.status_code == 403, origin
            assert response.json()["error"]["code"] == "forbidden"
        reads = await client.get("/v1/conversations", headers={"origin": "https://evil.example"})
        assert reads.status_code == 200  # CORS keeps the answer from that page
        for origin in ("http://127.0.0.1:8000", "https://chat.example.com", None):
            headers = {"origin": origin} if origin else {}
            made = await client.post("/v1/conversations", headers=headers)
            assert made.status_code == 201, origin


@pytest.mark.parametrize("store", ["memory"], indirect=True)
async def test_a_loopback_server_without_auth_answers_only_to_loopback_names(
    runtime: Runtime,
) -> None:
    app = create_app(runtime, hosts=["127.0.0.1", "localhost"])
    async with _client(app) as client:
        assert (await client.get("/v1/conversations")).status_code == 200
        rebound = await client.get("/v1/conversations", headers={"host": "evil.example:8000"})
        assert rebound.status_code == 403
        assert (await client.get("/healthz", headers={"host": "evil.example"})).status_code == 403


@pytest.mark.parametrize("store", ["memory"], indirect=True)
async def test_anonymous_callers_get_an_owner_of_their_own(runtime: Runtime) -> None:
    settings = AuthSettings(mode="keys", allow_anonymous=True, secret="s" * 32)
    app = create_app(runtime, auth=settings)
    async with _client(app) as first, _client(app) as second:
        made = await first.get("/v1/conversations")
        assert made.status_code == 200
        cookies = made.headers.get_list("set-cookie")
        anonymous = next(c for c in cookies if c.startswith(ANONYMOUS_COOKIE + "="))
        assert "HttpOnly" in anonymous and "SameSite=Lax" in anonymous
        assert "Secure" not in anonymous  # plain HTTP on a loopback address (test_session.py)
        csrf_cookie = next(c for c in cookies if c.startswith(CSRF_COOKIE + "="))
        assert "HttpOnly" not in csrf_cookie and "SameSite=Strict" in csrf_cookie
        token = made.headers[ANONYMOUS_TOKEN_HEADER]
        signed = anonymous.split(";", 1)[0].split("=", 1)[1]
        csrf = csrf_cookie.split(";", 1)[0].split("=", 1)[1]
        first.cookies.set(ANONYMOUS_COOKIE, signed)

        # a state-changing request riding the cookie needs the CSRF header
        refused = await first.post("/v1/conversations")
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "csrf_failed"
        wrong = await first.post("/v1/conversations", headers={"x-csrf-token": "0" * 40})
        assert wrong.status_code == 403
        who = (await first.get("/v1/caller")).json()
        assert who["method"] == "anonymous" and who["csrf_token"] == csrf
        mine = await first.post("/v1/conversations", headers={"x-csrf-token": csrf})
        assert mine.status_code == 201
        owner = mine.json()["owner"]
        assert owner.startswith("anon:")
        listed = (await first.get("/v1/conversations")).json()["conversations"]
        assert [c["id"] for c in listed] == [mine.json()["id"]]

        # the returned token works without the cookie (and without CSRF: no cookie)
        by_token = await second.get(
            "/v1/conversations", headers={"authorization": f"Bearer {token}"}
        )
        assert [c["owner"] for c in by_token.json()["conversations"]] == [owner]
        # another browser is another owner: ann's... the first one's conversation is 404
        stranger = await second.get(f"/v1/conversations/{mine.json()['id']}")
        assert stranger.status_code == 404
        forged = await second.get(
            "/v1/conversations", headers={"authorization": f"Bearer {token[:-2]}xx"}
        )
        assert forged.status_code == 401


@pytest.mark.parametrize("store", ["memory"], indirect=True)
async def test_an_anonymous_caller_is_told_to_sign_in_for_account_tools(
    store: Store, model: ScriptedModel
) -> None:
    ran: list[str] = []

    async def post_letter(text: str) -> str:
        """Post a letter."""
        ran.append(text)
        return "posted"

    async def shout(text: str) -> str:
        """Say it loudly."""
        ran.append(text.upper())
        return text.upper()

    tools = ToolRegistry(
        [
            function_tool(post_letter, risk="network"),
            function_tool(shout, risk="safe"),
        ]
    )
    runtime = Runtime(store, model=model, tools=tools, seed_recall=False)
    settings = AuthSettings(mode="keys", allow_anonymous=True, secret="s" * 32)
    app = create_app(runtime, auth=settings)
    model.add(
        tool_step(("post_letter", {"text": "hi"}), ("shout", {"text": "hi"})), text_step("ok")
    )
    async with _client(app) as client:
        token = (await client.get("/v1/conversations")).headers[ANONYMOUS_TOKEN_HEADER]
        client.headers["authorization"] = f"Bearer {token}"
        cid = (await client.post("/v1/conversations")).json()["id"]
        turn = await client.post(f"/v1/conversations/{cid}/turns", json={"text": "go"})
        assert turn.status_code == 200
    results = [
        block
        for message in turn.json()["messages"]
        for block in message["blocks"]
        if block["type"] == "tool_result"
    ]
    assert [r["content"] for r in results] == ["sign in to use post_letter", "HI"]
    assert ran == ["HI"]  # the account tool never ran
    assert "post_letter" in {t.name for t in model.requests[0].tools}  # still offered
    await runtime.close()
