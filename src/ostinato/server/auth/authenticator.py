"""``Authenticator``: a request's credentials to a ``Caller``, by the ``[auth]`` mode.

In the order it looks:

1. mode ``none``: everyone is the local owner; credentials are not read.
2. ``Authorization: Bearer <credential>``: an API key (``ost_...``, mode ``keys``), an
   anonymous token (``anon....``, with ``allow_anonymous``) or a JWT (mode ``oidc``).
   A credential that is presented and wrong is refused, never treated as absent.
3. the session cookie of a sign-in on the chat page (``POST /v1/session``): its API key
   is read again (so a revoked key ends it), or the owner its token named. A session
   that has ended is refused (and the browser told to forget it), never treated as
   absent.
4. the anonymous cookie (with ``allow_anonymous``).
5. nothing: with ``allow_anonymous``, a new anonymous owner (its cookie and token go
   back on the response), unless the client's address was given its share of new
   owners this minute (429, ``identity.limits.check_new_anonymous``); else refused.

A key's row read from the store is trusted for ``key_cache_s``: keys are revoked by the
CLI (another process), so every server refuses a revoked key within that time. Its
expiry is checked on every request, so an expired key is refused at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from starlette.requests import HTTPConnection

from ostinato.identity.keys import PREFIX, matches, parse_key
from ostinato.identity.limits import check_new_anonymous
from ostinato.identity.settings import AuthSettings
from ostinato.redaction import register_secret
from ostinato.server.auth.caller import LOCAL, Caller
from ostinato.server.auth.cookies import (
    ANONYMOUS_COOKIE,
    SESSION_COOKIE,
    TOKEN_PREFIX,
    Cookies,
    Session,
)
from ostinato.server.auth.failures import InvalidToken
from ostinato.store.accounts import ApiKey
from ostinato.store.base import Store, utcnow

if TYPE_CHECKING:
    from ostinato.server.auth.oidc import OidcVerifier

BAD_KEY = "the API key is not valid (unknown, revoked or expired)"
ENDED = "your session has ended (it expired, or its API key was revoked): sign in again"


class Unauthorized(Exception):
    """No caller could be established: 401, and why (``headers`` go on the answer)."""

    def __init__(self, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = headers or []


@dataclass(frozen=True, slots=True)
class Resolution:
    caller: Caller
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)  # for the response


class Authenticator:
    def __init__(
        self,
        settings: AuthSettings,
        store: Store,
        *,
        oidc: OidcVerifier | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        secret = settings.secret.get_secret_value() if settings.secret else None
        register_secret(secret)  # no error may show it
        if settings.oidc is not None and settings.oidc.client_secret is not None:
            register_secret(settings.oidc.client_secret.get_secret_value())
        self.cookies = Cookies(secret, secure=settings.cookie_secure)
        if oidc is None and settings.oidc is not None and "oidc" in settings.methods:
            from ostinato.server.auth.oidc import OidcVerifier  # JWT and HTTP: only here

            oidc = OidcVerifier(settings.oidc, prefix=settings.oidc_owner_prefix)
        self.oidc = oidc
        self._keys: dict[str, tuple[ApiKey | None, float]] = {}

    @property
    def open(self) -> bool:
        """Mode ``none``: every caller is the local owner."""
        return self.settings.mode == "none"

    async def resolve(self, connection: HTTPConnection) -> Resolution:
        """The caller of ``connection``; ``Unauthorized`` (or ``oidc.KeysUnavailable``)."""
        if self.open:
            return Resolution(LOCAL)
        presented = _bearer(connection.headers.get("authorization"))
        if presented is not None:
            return Resolution(await self._from_bearer(presented))
        session = connection.cookies.get(SESSION_COOKIE)
        if session:
            return Resolution(await self._from_session(session, connection))
        if self.settings.allow_anonymous:
            cookie = connection.cookies.get(ANONYMOUS_COOKIE)
            owner = self.cookies.anonymous_owner(cookie) if cookie else None
            if owner is not None:
                return Resolution(Caller(owner, "anonymous", via_cookie=True))
            client = connection.client.host if connection.client else "unknown"
            limits = self.settings.limits
            on = self.settings.limits_on
            await check_new_anonymous(self.store, limits, enabled=on, address=client)
            owner, signed = self.cookies.new_anonymous()
            secure = self.secure_for(connection)
            headers = self.cookies.set_cookie_headers(signed, owner, secure=secure)
            return Resolution(Caller(owner, "anonymous"), headers)
        raise Unauthorized(self._how_to_sign_in())

    def secure_for(self, connection: HTTPConnection) -> bool:
        """Whether the cookies of an answer to ``connection`` are marked ``Secure``."""
        return self.cookies.secure_for(connection.url.scheme, connection.headers.get("host"))

    def _how_to_sign_in(self) -> str:
        ways = {"keys": "an API key", "oidc": "an access token from the identity provider"}
        offered = " or ".join(ways[m] for m in sorted(self.settings.methods))
        return f"sign in: send Authorization: Bearer <{offered}>"

    async def _from_bearer(self, credential: str) -> Caller:
        methods = self.settings.methods
        if credential.startswith(PREFIX) and "keys" in methods:
            return await self._from_key(credential)
        if credential.startswith(TOKEN_PREFIX) and self.settings.allow_anonymous:
            owner = self.cookies.anonymous_owner(credential[len(TOKEN_PREFIX) :])
            if owner is None:
                raise Unauthorized("the anonymous token is not valid")
            return Caller(owner, "anonymous")
        if "oidc" in methods and self.oidc is not None and credential.count(".") == 2:
            try:
                verified = await self.oidc.verify(credential)
            except InvalidToken as exc:
                raise Unauthorized(exc.message) from None
            expires = datetime.fromtimestamp(verified.expires_at, UTC)
            return Caller(verified.owner, "oidc", expires_at=expires)
        raise Unauthorized(f"the bearer credential is not accepted here; {self._how_to_sign_in()}")

    async def _from_key(self, credential: str) -> Caller:
        presented = parse_key(credential)
        if presented is None:
            raise Unauthorized(BAD_KEY)
        key = await self._key(presented.key_id)
        if key is None or not matches(key, presented) or not key.usable(utcnow()):
            raise Unauthorized(BAD_KEY)
        prefix = self.settings.oidc_owner_prefix
        if prefix and key.owner.startswith(prefix):  # tokens' owners: never a key's
            raise Unauthorized(BAD_KEY)
        return Caller(key.owner, "key", credential=key.id, expires_at=key.expires_at)

    async def sign_in_with_key(self, credential: str) -> Caller:
        """The caller an API key proves (``Unauthorized`` if it does not, or if this
        server takes no keys): the sign-in of ``POST /v1/session``."""
        if not credential.startswith(PREFIX) or "keys" not in self.settings.methods:
            raise Unauthorized("this server does not take API keys")
        return await self._from_key(credential)

    async def _from_session(self, value: str, connection: HTTPConnection) -> Caller:
        session = self.cookies.session(value)
        caller = await self._session_caller(session) if session is not None else None
        if caller is None:
            forget = self.cookies.end_session_headers(secure=self.secure_for(connection))
            raise Unauthorized(ENDED, forget)
        return caller

    async def _session_caller(self, session: Session) -> Caller | None:
        """The caller of a live session; None when its proof no longer holds."""
        ends = datetime.fromtimestamp(session.expires_at, UTC)
        methods = self.settings.methods
        if session.method == "oidc":
            if "oidc" not in methods:
                return None
            return Caller(session.subject, "oidc", expires_at=ends, via_cookie=True)
        if "keys" not in methods:
            return None
        key = await self._key(session.subject)
        if key is None or not key.usable(utcnow()):
            return None
        if key.expires_at is not None:
            ends = min(ends, key.expires_at)
        return Caller(key.owner, "key", credential=key.id, expires_at=ends, via_cookie=True)

    async def _key(self, key_id: str, *, fresh: bool = False) -> ApiKey | None:
        cached = self._keys.get(key_id)
        now = time.monotonic()
        if cached is not None and not fresh and now - cached[1] < self.settings.key_cache_s:
            return cached[0]
        key = await self.store.get_api_key(key_id)
        if len(self._keys) > 10_000:
            self._keys.clear()
        self._keys[key_id] = (key, now)
        return key

    async def still_valid(self, caller: Caller) -> bool:
        """Whether the credential ``caller`` came with still holds (open streams ask)."""
        now = utcnow()
        if caller.expires_at is not None and caller.method != "oidc" and caller.expires_at <= now:
            return False  # a key, or a session riding one, that has expired
        if caller.method == "key" and caller.credential is not None:
            key = await self._key(caller.credential, fresh=True)
            return key is not None and key.usable(now)
        if caller.method == "oidc" and caller.expires_at is not None:
            leeway = timedelta(seconds=self.settings.oidc.leeway_s if self.settings.oidc else 0)
            return caller.expires_at + leeway > now
        return True

    async def aclose(self) -> None:
        if self.oidc is not None:
            await self.oidc.aclose()


def _bearer(header: str | None) -> str | None:
    """The credential of an ``Authorization: Bearer`` header (None without one)."""
    if header is None:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise Unauthorized("send credentials as Authorization: Bearer <credential>")
    return value.strip()
