"""Owners from different sources cannot collide (issue 25, item 8), and a remembered
token follows the issuer's key set (item 11): before, in mode ``keys,oidc`` a token whose
owner claim was ``ann`` was the API-key owner ``ann``, with all her data; and a token
accepted once stayed accepted after its key left the issuer's keys."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from ostinato.identity.keys import create_key
from ostinato.identity.owners import check_owner_name
from ostinato.identity.settings import AuthSettings, OidcSettings
from ostinato.runtime import Runtime
from ostinato.server import create_app
from tests.server.oidc_issuer import AUDIENCE, Issuer, serve_issuer


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    with serve_issuer() as state:
        yield state


def _client(app: object, credential: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),  # type: ignore[arg-type]
        base_url="http://t",
        headers={"authorization": f"Bearer {credential}"},
    )


async def test_a_tokens_owner_is_never_an_api_keys_owner(runtime: Runtime, issuer: Issuer) -> None:
    oidc = OidcSettings(issuer=issuer.url, audience=[AUDIENCE])
    app = create_app(runtime, auth=AuthSettings(mode="keys,oidc", oidc=oidc))
    key = (await create_key(runtime.store, "ann", "cli"))[1]
    async with _client(app, key) as ann:
        made = (await ann.post("/v1/conversations", json={"title": "ann's secrets"})).json()
    async with _client(app, issuer.token(sub="ann")) as token:
        me = (await token.get("/v1/caller")).json()
        assert me["owner"] == "oidc:ann"
        assert (await token.get(f"/v1/conversations/{made['id']}")).status_code == 404
        assert (await token.get("/v1/conversations")).json()["conversations"] == []
    await app.state.ostinato.aclose()


async def test_in_mode_oidc_alone_owners_keep_their_claim(runtime: Runtime, issuer: Issuer) -> None:
    oidc = OidcSettings(issuer=issuer.url, audience=[AUDIENCE])
    app = create_app(runtime, auth=AuthSettings(mode="oidc", oidc=oidc))
    async with _client(app, issuer.token(sub="ann")) as token:
        assert (await token.get("/v1/caller")).json()["owner"] == "ann"
    await app.state.ostinato.aclose()


def test_owners_cannot_be_put_together_by_settings_or_by_a_key() -> None:
    oidc = OidcSettings(issuer="https://i", audience=["a"], owner_prefix="")
    with pytest.raises(ValueError, match="owner_prefix"):
        AuthSettings(mode="keys,oidc", oidc=oidc)
    with pytest.raises(ValueError, match="reserved"):
        check_owner_name("oidc:ann")  # no key may be made for a token's owner


async def test_a_remembered_token_follows_the_issuers_key_set(
    runtime: Runtime, issuer: Issuer
) -> None:
    oidc = OidcSettings(issuer=issuer.url, audience=[AUDIENCE], jwks_cache_s=0.01)
    app = create_app(runtime, auth=AuthSettings(mode="oidc", oidc=oidc))
    token = issuer.token(sub="ann")
    async with _client(app, token) as client:
        assert (await client.get("/v1/conversations")).status_code == 200
        issuer.add_key("k2")
        issuer.published.remove("k1")  # the issuer withdrew the key that signed it
        await asyncio.sleep(0.05)  # past jwks_cache_s: the keys are read again
        refused = await client.get("/v1/conversations")
        assert refused.status_code == 401, refused.text
        assert "no longer publishes" in refused.json()["error"]["message"]
    await app.state.ostinato.aclose()
