"""Signing in on the chat page (``/v1/session``): an API key or an authorization code
with PKCE becomes a session cookie that carries the key's identity (revoking the key ends
it), cookie-riding requests need the CSRF token, signing out forgets the cookie, and the
cookie is ``Secure`` except over plain HTTP on a loopback address."""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
import pytest
from fastapi import FastAPI

from ostinato.identity.keys import create_key, revoke_key
from ostinato.identity.settings import AuthSettings, OidcSettings
from ostinato.models.scripted import ScriptedModel
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.server.auth.cookies import CSRF_COOKIE, SESSION_COOKIE, Session
from ostinato.store.memory import MemoryStore
from tests.e2e.server import free_port
from tests.fakes.issuer import FakeIssuer, s256

SECRET = "s" * 32
PAGE = "http://127.0.0.1:8000"


@pytest.fixture
async def runtime(model: ScriptedModel) -> AsyncIterator[Runtime]:
    """Sessions are checked before any store is read but the key's: one engine is enough
    (the browser tests run them against SQLite)."""
    runtime = Runtime(MemoryStore(), model=model)
    yield runtime
    await runtime.close()


@pytest.fixture
def issuer() -> Iterator[FakeIssuer]:
    with FakeIssuer() as issuer:
        yield issuer


def keys_app(runtime: Runtime, **settings: object) -> FastAPI:
    auth = AuthSettings(mode="keys", secret=SECRET, key_cache_s=0, **settings)  # type: ignore[arg-type]
    return create_app(runtime, auth=auth)


def oidc_app(runtime: Runtime, issuer: FakeIssuer, **oidc: object) -> FastAPI:
    settings = OidcSettings(
        issuer=issuer.url,
        audience=[issuer.audience],
        client_id=issuer.client_id,
        **oidc,  # type: ignore[arg-type]
    )
    return create_app(runtime, auth=AuthSettings(mode="oidc", secret=SECRET, oidc=settings))


def browser(app: FastAPI, base_url: str = PAGE) -> httpx.AsyncClient:
    """A client that keeps cookies, like a browser on ``base_url``."""
    transport = httpx.ASGITransport(app=app)
    return httpx.AsyncClient(transport=transport, base_url=base_url)


def set_cookies(response: httpx.Response) -> dict[str, str]:
    """Each ``Set-Cookie`` of a response, by cookie name."""
    return {c.split("=", 1)[0]: c for c in response.headers.get_list("set-cookie")}


async def test_a_key_signs_in_and_the_cookie_carries_it(runtime: Runtime) -> None:
    _, key = await create_key(runtime.store, "ann", "laptop")
    app = keys_app(runtime)
    async with browser(app) as page:
        assert (await page.get("/v1/conversations")).status_code == 401
        signed = await page.post("/v1/session", json={"key": key})
        assert signed.status_code == 200, signed.text
        body = signed.json()
        assert body["owner"] == "ann" and body["method"] == "key" and body["csrf_token"]
        cookies = set_cookies(signed)
        session = cookies[SESSION_COOKIE]
        assert "HttpOnly" in session and "SameSite=Strict" in session and "Path=/" in session
        assert key not in session and key.split("_", 2)[2] not in signed.text  # no secret
        assert "HttpOnly" not in cookies[CSRF_COOKIE]  # the page may read it

        assert (await page.get("/v1/conversations")).status_code == 200
        assert (await page.get("/v1/caller")).json() == body
        # a state-changing request riding the cookie needs the CSRF token
        refused = await page.post("/v1/conversations", json={})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "csrf_failed"
        headers = {"x-csrf-token": body["csrf_token"]}
        made = await page.post("/v1/conversations", json={}, headers=headers)
        assert made.status_code == 201 and made.json()["owner"] == "ann"
    await app.state.ostinato.aclose()


async def test_revoking_the_key_ends_its_session_at_once(runtime: Runtime) -> None:
    stored, key = await create_key(runtime.store, "ann", "laptop")
    app = keys_app(runtime)
    async with browser(app) as page:
        assert (await page.post("/v1/session", json={"key": key})).status_code == 200
        assert (await page.get("/v1/conversations")).status_code == 200
        await revoke_key(runtime.store, stored.id)
        ended = await page.get("/v1/conversations")
        assert ended.status_code == 401
        assert "session has ended" in ended.json()["error"]["message"]
        assert "Max-Age=0" in set_cookies(ended)[SESSION_COOKIE]  # the browser forgets it
        assert SESSION_COOKIE not in page.cookies
        assert (await page.post("/v1/session", json={"key": key})).status_code == 401
    await app.state.ostinato.aclose()


async def test_another_sites_page_cannot_sign_in_or_out(runtime: Runtime) -> None:
    _, key = await create_key(runtime.store, "ann", "laptop")
    app = keys_app(runtime)
    async with browser(app) as page:
        evil = {"origin": "https://evil.example"}
        refused = await page.post("/v1/session", json={"key": key}, headers=evil)
        assert refused.status_code == 403 and SESSION_COOKIE not in set_cookies(refused)
        assert (await page.delete("/v1/session", headers=evil)).status_code == 403
    await app.state.ostinato.aclose()


async def test_signing_out_forgets_the_session(runtime: Runtime) -> None:
    _, key = await create_key(runtime.store, "ann", "laptop")
    app = keys_app(runtime)
    async with browser(app) as page:
        assert (await page.post("/v1/session", json={"key": key})).status_code == 200
        out = await page.delete("/v1/session")
        assert out.status_code == 204
        assert "Max-Age=0" in set_cookies(out)[SESSION_COOKIE]
        assert (await page.get("/v1/conversations")).status_code == 401
    await app.state.ostinato.aclose()


async def test_forged_expired_and_wrong_sessions_are_refused(runtime: Runtime) -> None:
    stored, key = await create_key(runtime.store, "ann", "laptop")
    app = keys_app(runtime)
    cookies = app.state.ostinato.auth.cookies
    expired = cookies.seal(Session("key", stored.id, time.time() - 1))
    oidc_in_keys_mode = cookies.seal(Session("oidc", "ann", time.time() + 60))
    forged = cookies.seal(Session("key", stored.id, time.time() + 60))[:-2] + "xx"
    for value in (expired, oidc_in_keys_mode, forged, "garbage"):
        async with browser(app) as page:
            page.cookies.set(SESSION_COOKIE, value)
            response = await page.get("/v1/conversations")
            assert response.status_code == 401, value
    async with browser(app) as page:
        for proof in ({"key": "ost_nope"}, {"key": key + "x"}):
            refused = await page.post("/v1/session", json=proof)
            assert refused.status_code == 401 and SESSION_COOKIE not in set_cookies(refused)
        assert (await page.post("/v1/session", json={})).status_code == 422
        both = {"key": key, "code": "c", "code_verifier": "v" * 43, "redirect_uri": PAGE + "/"}
        assert (await page.post("/v1/session", json=both)).status_code == 422
    await app.state.ostinato.aclose()


@pytest.mark.parametrize(
    ("base_url", "cookie_secure", "secure"),
    [
        ("http://127.0.0.1:8000", True, False),  # loopback over plain HTTP
        ("http://localhost:8000", True, False),
        ("http://chat.example.com", True, True),  # plain HTTP elsewhere: still Secure
        ("http://chat.example.com", False, False),
        ("https://chat.example.com", False, True),  # HTTPS: always
    ],
)
async def test_the_session_cookie_is_secure_unless_on_loopback_over_http(
    runtime: Runtime, base_url: str, cookie_secure: bool, secure: bool
) -> None:
    _, key = await create_key(runtime.store, "ann", "laptop")
    app = keys_app(runtime, cookie_secure=cookie_secure)
    async with browser(app, base_url) as page:
        signed = await page.post("/v1/session", json={"key": key})
        for cookie in set_cookies(signed).values():
            assert ("; Secure" in cookie) is secure, cookie
    await app.state.ostinato.aclose()


async def test_the_session_ends_with_its_key_or_after_session_s(runtime: Runtime) -> None:
    _, short = await create_key(runtime.store, "ann", "x", expires_in=timedelta(seconds=120))
    _, long = await create_key(runtime.store, "ann", "y")
    app = keys_app(runtime, session_s=3600)
    async with browser(app) as page:
        ages = []
        for key in (short, long):
            signed = await page.post("/v1/session", json={"key": key})
            max_age = set_cookies(signed)[SESSION_COOKIE].split("Max-Age=")[1].split(";")[0]
            ages.append(int(max_age))
        assert 100 <= ages[0] <= 120 and 3500 <= ages[1] <= 3600
    await app.state.ostinato.aclose()


async def test_sign_in_options(runtime: Runtime, issuer: FakeIssuer) -> None:
    async with browser(create_app(runtime)) as page:  # mode none: nothing to sign in to
        options = (await page.get("/v1/session")).json()
        assert options == {"methods": [], "anonymous": False, "oidc": None, "problem": None}
        refused = await page.post("/v1/session", json={"key": "ost_x"})
        assert refused.status_code == 401
    app = keys_app(runtime, allow_anonymous=True)
    async with browser(app) as page:
        options = (await page.get("/v1/session")).json()
        assert options["methods"] == ["keys"] and options["anonymous"] is True
    app = oidc_app(runtime, issuer, scopes="openid profile", authorize_params={"prompt": "login"})
    async with browser(app) as page:
        options = (await page.get("/v1/session")).json()
        assert options["methods"] == ["oidc"]
        assert options["oidc"] == {
            "authorization_endpoint": f"{issuer.url}/authorize",
            "client_id": issuer.client_id,
            "redirect_uri": None,
            "scope": "openid profile",
            "params": {"prompt": "login"},
        }
    await app.state.ostinato.aclose()


async def _authorize(issuer: FakeIssuer, redirect_uri: str) -> tuple[str, str]:
    """Play the browser's part at the issuer: a PKCE verifier, and the code the
    authorization endpoint sends back."""
    verifier = secrets.token_urlsafe(48)
    query = {
        "response_type": "code",
        "client_id": issuer.client_id,
        "redirect_uri": redirect_uri,
        "scope": "openid",
        "state": "st",
        "code_challenge": s256(verifier),
        "code_challenge_method": "S256",
    }
    async with httpx.AsyncClient() as client:
        response = await client.get(f"{issuer.url}/authorize?{urlencode(query)}")
    assert response.status_code == 302
    back = dict(parse_qsl(urlsplit(response.headers["location"]).query))
    assert back["state"] == "st"
    return back["code"], verifier


async def test_the_code_flow_with_pkce_signs_in(runtime: Runtime, issuer: FakeIssuer) -> None:
    app = oidc_app(runtime, issuer)
    redirect = f"{PAGE}/signin/callback"
    code, verifier = await _authorize(issuer, redirect)
    async with browser(app) as page:
        proof = {"code": code, "code_verifier": verifier, "redirect_uri": redirect}
        signed = await page.post("/v1/session", json=proof)
        assert signed.status_code == 200, signed.text
        assert signed.json()["owner"] == "carol" and signed.json()["method"] == "oidc"
        assert "access_token" not in signed.text  # the token stays on the server
        (exchange,) = issuer.exchanged
        assert exchange["code_verifier"] == verifier and exchange["client_id"] == "ostinato-page"
        listed = await page.get("/v1/conversations")
        assert listed.status_code == 200
        csrf = {"x-csrf-token": signed.json()["csrf_token"]}
        made = await page.post("/v1/conversations", json={}, headers=csrf)
        assert made.json()["owner"] == "carol"
        again = await page.post("/v1/session", json=proof)  # a code is good once
        assert again.status_code == 401 and "invalid_grant" in again.json()["error"]["message"]
    await app.state.ostinato.aclose()


async def test_the_code_flow_refuses_a_wrong_verifier_or_redirect(
    runtime: Runtime, issuer: FakeIssuer
) -> None:
    redirect = f"{PAGE}/signin/callback"
    app = oidc_app(runtime, issuer, redirect_uri=redirect)
    async with browser(app) as page:
        code, verifier = await _authorize(issuer, redirect)
        wrong = {"code": code, "code_verifier": "w" * 43, "redirect_uri": redirect}
        refused = await page.post("/v1/session", json=wrong)
        assert refused.status_code == 401 and "invalid_grant" in refused.text
        elsewhere = {"code": code, "code_verifier": verifier, "redirect_uri": f"{PAGE}/x"}
        refused = await page.post("/v1/session", json=elsewhere)
        assert refused.status_code == 401 and "redirect URI" in refused.text
        short = {"code": code, "code_verifier": "short", "redirect_uri": redirect}
        assert (await page.post("/v1/session", json=short)).status_code == 422
        assert (await page.get("/v1/conversations")).status_code == 401
    await app.state.ostinato.aclose()


async def test_a_confidential_client_sends_its_secret(runtime: Runtime) -> None:
    with FakeIssuer(client_secret="sh/h s3cret") as issuer:
        redirect = f"{PAGE}/signin/callback"
        app = oidc_app(runtime, issuer, client_secret="sh/h s3cret")
        code, verifier = await _authorize(issuer, redirect)
        async with browser(app) as page:
            proof = {"code": code, "code_verifier": verifier, "redirect_uri": redirect}
            assert (await page.post("/v1/session", json=proof)).status_code == 200
        await app.state.ostinato.aclose()


async def test_an_unreachable_issuer_is_a_503(runtime: Runtime) -> None:
    gone = f"http://127.0.0.1:{free_port()}"
    settings = OidcSettings(issuer=gone, audience=["ostinato"], client_id="page")
    app = create_app(runtime, auth=AuthSettings(mode="keys,oidc", secret=SECRET, oidc=settings))
    async with browser(app) as page:
        options = (await page.get("/v1/session")).json()
        assert options["methods"] == ["keys"] and "discovery" in options["problem"]
        proof = {"code": "c", "code_verifier": "v" * 43, "redirect_uri": f"{PAGE}/signin/callback"}
        response = await page.post("/v1/session", json=proof)
        assert response.status_code == 503
    await app.state.ostinato.aclose()
