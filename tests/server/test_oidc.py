"""Mode ``oidc`` against a local JWKS server (a real HTTP server on 127.0.0.1): tokens
signed by a test key pass; a rotated key is fetched when a token names it; an expired
token, a wrong audience or issuer, ``alg: none``, an HS256 token "signed" with the public
key, and a token from an unknown key are refused. Keys and tokens together work too; a
stream opened with a token ends when the token expires. Every test runs on each store
engine (``runtime`` of tests/server/conftest.py: memory, SQLite, PostgreSQL)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from fastapi import FastAPI

from ostinato.config import load_config
from ostinato.identity.keys import create_key
from ostinato.identity.settings import AuthSettings, OidcSettings
from ostinato.runtime import Runtime
from ostinato.server import create_app
from tests.server.oidc_issuer import AUDIENCE, Issuer, serve_issuer
from tests.server.sse_client import open_stream


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    with serve_issuer() as state:
        yield state


def _app(runtime: Runtime, issuer: Issuer, mode: str = "oidc") -> FastAPI:
    oidc = OidcSettings(issuer=issuer.url, audience=[AUDIENCE])
    return create_app(runtime, auth=AuthSettings(mode=mode, oidc=oidc))


async def _status(app: FastAPI, token: str) -> tuple[int, str]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        response = await client.get(
            "/v1/conversations", headers={"authorization": f"Bearer {token}"}
        )
        text = response.json()["error"]["message"] if response.status_code != 200 else ""
        assert token not in response.text
        return response.status_code, text


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


async def test_a_valid_token_names_its_owner(runtime: Runtime, issuer: Issuer) -> None:
    app = _app(runtime, issuer)
    token = issuer.token(sub="ann@example.com")
    transport = httpx.ASGITransport(app=app)
    headers = {"authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as c:
        made = await c.post("/v1/conversations")
        assert made.status_code == 201 and made.json()["owner"] == "ann@example.com"
        assert (await c.get("/v1/conversations")).status_code == 200
    assert issuer.fetches == 1  # the keys were fetched once, through discovery
    await app.state.ostinato.aclose()


async def test_a_rotated_key_is_fetched_when_a_token_names_it(
    runtime: Runtime, issuer: Issuer
) -> None:
    app = _app(runtime, issuer)
    assert (await _status(app, issuer.token()))[0] == 200
    issuer.add_key("k2", ec.generate_private_key(ec.SECP256R1()))
    issuer.published.remove("k1")  # rotated: the old key is gone
    assert (await _status(app, issuer.token("k2", alg="ES256")))[0] == 200
    assert issuer.fetches == 2
    # a token of a key the issuer never published does not fetch the keys again at once
    issuer.add_key("k3")
    issuer.published.remove("k3")
    status, message = await _status(app, issuer.token("k3"))
    assert status == 401 and "does not publish" in message
    assert issuer.fetches == 2
    await app.state.ostinato.aclose()


@pytest.mark.parametrize(
    ("claims", "says"),
    [
        ({"exp": -600}, "expired"),  # exp and nbf: seconds from when the test runs
        ({"aud": "someone-else"}, "audience"),
        ({"iss": "https://evil.example"}, "issuer"),
        ({"nbf": 600}, "not yet valid"),
        ({"sub": "local"}, "reserved"),
        ({"sub": 42}, "sub"),
    ],
)
async def test_bad_claims_are_refused(
    runtime: Runtime, issuer: Issuer, claims: dict[str, Any], says: str
) -> None:
    now = int(time.time())  # not at collection: a slow suite reaches this much later
    claims = {k: now + v if k in ("exp", "nbf") else v for k, v in claims.items()}
    app = _app(runtime, issuer)
    status, message = await _status(app, issuer.token(**claims))
    assert status == 401 and says in message.lower()
    await app.state.ostinato.aclose()


async def test_forged_tokens_are_refused(runtime: Runtime, issuer: Issuer) -> None:
    app = _app(runtime, issuer)
    now = int(time.time())
    claims = {"iss": issuer.url, "aud": AUDIENCE, "sub": "ann", "exp": now + 300}
    unsigned = f"{_b64({'alg': 'none', 'kid': 'k1'})}.{_b64(claims)}."
    public_pem = (
        issuer.keys["k1"]
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    header = _b64({"alg": "HS256", "kid": "k1", "typ": "JWT"})
    payload = _b64(claims)
    mac = hmac.new(public_pem, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    confused = f"{header}.{payload}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    wrong_key = jwt.encode(claims, stranger, algorithm="RS256", headers={"kid": "k1"})
    good = issuer.token()
    tampered = good.rsplit(".", 2)
    tampered[1] = _b64({**claims, "sub": "bob"})
    for token, says in (
        (unsigned, "not accepted"),
        (confused, "not accepted"),
        (wrong_key, "signature"),
        (".".join(tampered), "signature"),
        ("a.b.c", "not a jwt"),
    ):
        status, message = await _status(app, token)
        assert status == 401, token
        assert says in message.lower(), message
    await app.state.ostinato.aclose()


async def test_unreachable_keys_are_a_503(runtime: Runtime, issuer: Issuer) -> None:
    oidc = OidcSettings(issuer=issuer.url, audience=[AUDIENCE], jwks_url="http://127.0.0.1:9/jwks")
    app = create_app(runtime, auth=AuthSettings(mode="oidc", oidc=oidc))
    status, message = await _status(app, issuer.token())
    assert status == 503 and "cannot fetch the issuer's keys" in message
    await app.state.ostinato.aclose()


async def test_a_stream_opened_with_a_token_ends_when_the_token_expires(
    runtime: Runtime, issuer: Issuer
) -> None:
    oidc = OidcSettings(issuer=issuer.url, audience=[AUDIENCE], leeway_s=0)
    settings = AuthSettings(mode="oidc", oidc=oidc, stream_recheck_s=0.05)
    app = create_app(runtime, auth=settings, ping_interval=0.2)
    # 5 to 6 s from now: long enough to open the stream on a loaded machine (a 401 at
    # opening fails the test); when it ends is checked against the wall clock, not timed
    expires = int(time.time() + 5.0) + 1
    token = issuer.token(exp=expires)
    headers = {"authorization": f"Bearer {token}"}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as c:
        cid = (await c.post("/v1/conversations")).json()["id"]
    async with open_stream(app, "GET", f"/v1/conversations/{cid}/events", headers=headers) as s:
        assert s.status == 200  # the token held when the stream opened
        frame = await s.next_frame(within=15)
        ended = time.time()
        assert frame.event == "error" and frame.data["code"] == "unauthorized"
        with pytest.raises(EOFError):
            await s.next_frame()
    assert ended >= expires  # it ended when the token did, not before
    status, message = await _status(app, token)
    assert status == 401 and "expired" in message
    await app.state.ostinato.aclose()


async def test_keys_and_tokens_together(runtime: Runtime, issuer: Issuer) -> None:
    app = _app(runtime, issuer, "keys,oidc")
    key = (await create_key(runtime.store, "bob", "cli"))[1]
    assert (await _status(app, key))[0] == 200
    assert (await _status(app, issuer.token()))[0] == 200
    assert (await _status(app, key[:-3] + "abc"))[0] == 401
    await app.state.ostinato.aclose()


def test_settings_refuse_symmetric_algorithms_and_need_an_issuer() -> None:
    with pytest.raises(ValueError, match="public-key algorithms"):
        OidcSettings(issuer="https://i", audience=["a"], algorithms=["HS256"])
    with pytest.raises(ValueError, match="needs an"):
        AuthSettings(mode="oidc")
    env = {
        "OSTINATO_AUTH__MODE": "keys,oidc",
        "OSTINATO_AUTH__OIDC__ISSUER": "https://i",
        "OSTINATO_AUTH__OIDC__AUDIENCE": "a,b",
        "OSTINATO_AUTH__LIMITS__RUNNING_TURNS": "7",
    }
    settings = load_config(None, env=env)[0].auth
    assert settings.methods == {"keys", "oidc"} and settings.oidc is not None
    assert settings.oidc.audience == ["a", "b"] and settings.limits.running_turns == 7
