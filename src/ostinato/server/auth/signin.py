"""Signing in on the chat page: a proof of who a person is becomes a session cookie
(``cookies.Session``), so the page never keeps a credential of its own.

- An API key (mode ``keys``): the session names the key's id, and every request reads
  the key again, so revoking the key ends the session.
- The authorization code flow with PKCE (mode ``oidc`` with a ``client_id``): the page
  sends the person to the issuer's authorization endpoint with a code challenge, the
  issuer sends them back with a code, and the server trades the code and the page's
  verifier for an access token at the issuer's token endpoint (server to server: no token
  reaches the browser). The token is checked like any bearer token (``oidc``); the
  session names the owner it names.

Either way the session lasts ``session_s`` (never past the key's own expiry). ``offered``
tells the page which ways this server has.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from ostinato.server.auth.authenticator import Authenticator, Unauthorized
from ostinato.server.auth.caller import Caller
from ostinato.server.auth.cookies import Session
from ostinato.server.auth.failures import InvalidToken, KeysUnavailable

if TYPE_CHECKING:  # the JWT and HTTP libraries load only in mode oidc (server/auth/oidc.py)
    from ostinato.server.auth.oidc import OidcVerifier


@dataclass(frozen=True, slots=True)
class OidcOffer:
    """What the page needs to send a person to the issuer."""

    authorization_endpoint: str
    client_id: str
    redirect_uri: str | None  # None: the page's own /signin/callback
    scope: str
    params: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Offer:
    methods: tuple[Literal["keys", "oidc"], ...]  # the ways to sign in on the page
    anonymous: bool
    oidc: OidcOffer | None = None
    problem: str | None = None  # why a configured way is not offered right now


async def offered(auth: Authenticator) -> Offer:
    """The ways a person can sign in on the chat page of this server."""
    settings = auth.settings
    methods: list[Literal["keys", "oidc"]] = ["keys"] if "keys" in settings.methods else []
    oidc, problem = None, None
    if auth.oidc is not None and auth.oidc.settings.client_id is not None:
        try:
            oidc = await _oidc_offer(auth.oidc)
            methods.append("oidc")
        except KeysUnavailable as exc:
            problem = str(exc)
    return Offer(tuple(methods), settings.allow_anonymous, oidc, problem)


async def _oidc_offer(verifier: OidcVerifier) -> OidcOffer:
    settings = verifier.settings
    assert settings.client_id is not None
    endpoint = _endpoint(await _discovery(verifier), "authorization_endpoint")
    return OidcOffer(
        endpoint,
        settings.client_id,
        settings.redirect_uri,
        " ".join(settings.scopes),
        dict(settings.authorize_params),
    )


def with_key(auth: Authenticator, caller: Caller) -> Session:
    """The session of a caller an API key proved (``Authenticator.sign_in_with_key``)."""
    assert caller.credential is not None
    ends = time.time() + auth.settings.session_s
    if caller.expires_at is not None:
        ends = min(ends, caller.expires_at.timestamp())
    return Session("key", caller.credential, ends)


async def with_code(
    auth: Authenticator, code: str, code_verifier: str, redirect_uri: str
) -> tuple[Caller, Session]:
    """Trade an authorization code for an access token at the issuer, check the token,
    and start a session for the owner it names. ``Unauthorized`` when the issuer or the
    check refuses; ``KeysUnavailable`` when the issuer cannot be reached."""
    verifier = auth.oidc
    if verifier is None or verifier.settings.client_id is None:
        raise Unauthorized("this server does not sign in through an identity provider")
    expected = verifier.settings.redirect_uri
    if expected is not None and redirect_uri != expected:
        raise Unauthorized("the redirect URI is not the one this server is configured with")
    token = await _exchange(verifier, code, code_verifier, redirect_uri)
    try:
        verified = await verifier.verify(token)
    except InvalidToken as exc:
        raise Unauthorized(f"the identity provider's access token: {exc.message}") from None
    ends = time.time() + auth.settings.session_s
    caller = Caller(
        verified.owner, "oidc", expires_at=datetime.fromtimestamp(ends, UTC), via_cookie=True
    )
    return caller, Session("oidc", verified.owner, ends)


async def _exchange(
    verifier: OidcVerifier, code: str, code_verifier: str, redirect_uri: str
) -> str:
    """The access token the issuer's token endpoint gives for ``code`` (RFC 6749 4.1.3
    with RFC 7636's ``code_verifier``); a confidential client authenticates with HTTP
    Basic, a public one names itself in the form."""
    import httpx  # a verifier exists: mode oidc, which has loaded it already

    settings = verifier.settings
    assert settings.client_id is not None
    endpoint = _endpoint(await _discovery(verifier), "token_endpoint")
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "code_verifier": code_verifier,
        "client_id": settings.client_id,
    }
    secret = settings.client_secret
    extra: dict[str, Any] = {}
    if secret is not None:  # RFC 6749 2.3.1: both form-encoded first
        extra["auth"] = httpx.BasicAuth(quote(settings.client_id), quote(secret.get_secret_value()))
    try:
        response = await verifier.client.post(
            endpoint, data=form, headers={"accept": "application/json"}, **extra
        )
        body: Any = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise KeysUnavailable(f"cannot reach the identity provider: {exc}") from None
    if not isinstance(body, dict):
        body = {}
    if response.status_code != 200:
        why = str(body.get("error", f"HTTP {response.status_code}"))[:100]
        detail = str(body.get("error_description", ""))[:200]
        raise Unauthorized(f"the identity provider refused the sign-in: {why} {detail}".strip())
    token = body.get("access_token")
    if not isinstance(token, str) or not token:
        raise Unauthorized("the identity provider answered without an access token")
    return token


async def _discovery(verifier: OidcVerifier) -> dict[str, Any]:
    import httpx

    try:
        return await verifier.discovery()
    except (httpx.HTTPError, ValueError) as exc:
        raise KeysUnavailable(f"cannot read the identity provider's discovery: {exc}") from None


def _endpoint(discovery: dict[str, Any], name: str) -> str:
    url = discovery.get(name)
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        raise KeysUnavailable(f"the identity provider's discovery document has no {name}")
    return url
