"""Cookies and what protects them: the anonymous owner's cookie, the session cookie a
sign-in on the chat page hands out (both signed, HttpOnly), and the CSRF token that a
state-changing request riding a cookie must echo in a header.

A session names what proved who the person is, never a secret: an API key's id (every
request reads the key again, so revoking it ends the session) or the owner an identity
provider's token named. It ends at its ``expires_at`` whatever the browser keeps.

A cookie is sent by the browser whatever page asks, so a request authenticated by one
proves nothing about who wrote it. The CSRF token is bound to the owner (an HMAC under
the server's secret): a page of this site reads it (``GET /v1/caller`` or the
``ostinato_csrf`` cookie) and sends it back as ``X-CSRF-Token``; a page of another site
can do neither.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Literal

from itsdangerous import BadSignature, URLSafeSerializer

from ostinato.identity.binding import is_loopback
from ostinato.identity.owners import ANONYMOUS_PREFIX

ANONYMOUS_COOKIE = "ostinato_anon"
SESSION_COOKIE = "ostinato_session"
CSRF_COOKIE = "ostinato_csrf"
CSRF_HEADER = "x-csrf-token"
ANONYMOUS_TOKEN_HEADER = "x-ostinato-anonymous-token"
TOKEN_PREFIX = "anon."  # an anonymous token sent as a bearer token
YEAR_S = 365 * 86_400


@dataclass(frozen=True, slots=True)
class Session:
    """A sign-in: how it was proved (an API key's id, or the owner a token named) and
    when it ends (seconds since the epoch)."""

    method: Literal["key", "oidc"]
    subject: str
    expires_at: float

    def ended(self, now: float | None = None) -> bool:
        return self.expires_at <= (time.time() if now is None else now)


class Cookies:
    """Signs and checks what the server hands out, under one secret."""

    def __init__(self, secret: str | None, *, secure: bool = True) -> None:
        self._secret = secret or secrets.token_urlsafe(32)
        self.generated = secret is None
        self.secure = secure
        self._anonymous = URLSafeSerializer(self._secret, salt="ostinato-anonymous")
        self._sessions = URLSafeSerializer(self._secret, salt="ostinato-session")

    def secure_for(self, scheme: str, host: str | None) -> bool:
        """Whether cookies sent on this request are marked ``Secure``: always over HTTPS;
        over plain HTTP unless ``secure`` is off or the page is on a loopback address
        (where nothing crosses a network, and some browsers refuse such a cookie)."""
        if scheme in ("https", "wss"):
            return True
        name = (host or "").strip().lower()
        name = name.split("]", 1)[0] + "]" if name.startswith("[") else name.rsplit(":", 1)[0]
        return self.secure and not is_loopback(name)

    def seal(self, session: Session) -> str:
        """The signed cookie value of ``session``."""
        return self._sessions.dumps([session.method, session.subject, int(session.expires_at)])

    def session(self, value: str) -> Session | None:
        """The session a cookie value names; None if forged, malformed or ended."""
        try:
            loaded = self._sessions.loads(value)
        except BadSignature:
            return None
        match loaded:
            case ["key" | "oidc" as method, str(subject), int(expires_at)] if subject:
                found = Session(method, subject, float(expires_at))
                return None if found.ended() else found
        return None

    def new_anonymous(self) -> tuple[str, str]:
        """A new anonymous owner and its signed value (cookie or bearer token)."""
        owner = ANONYMOUS_PREFIX + secrets.token_urlsafe(16)
        return owner, self._anonymous.dumps(owner)

    def anonymous_owner(self, value: str) -> str | None:
        """The anonymous owner a signed value names; None if it is forged or malformed."""
        try:
            owner = self._anonymous.loads(value)
        except BadSignature:
            return None
        if not isinstance(owner, str) or not owner.startswith(ANONYMOUS_PREFIX):
            return None
        return owner

    def csrf_token(self, owner: str) -> str:
        digest = hmac.new(self._secret.encode(), b"csrf\x00" + owner.encode(), hashlib.sha256)
        return digest.hexdigest()[:40]

    def csrf_ok(self, owner: str, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(self.csrf_token(owner), presented)

    def set_cookie_headers(
        self, signed: str, owner: str, *, secure: bool
    ) -> list[tuple[bytes, bytes]]:
        """The ``Set-Cookie`` headers that hand a browser its anonymous owner."""
        return [
            _cookie(ANONYMOUS_COOKIE, signed, YEAR_S, secure, "HttpOnly; SameSite=Lax"),
            _cookie(CSRF_COOKIE, self.csrf_token(owner), YEAR_S, secure, "SameSite=Strict"),
            (ANONYMOUS_TOKEN_HEADER.encode(), (TOKEN_PREFIX + signed).encode()),
        ]

    def session_headers(
        self, session: Session, owner: str, *, secure: bool
    ) -> list[tuple[bytes, bytes]]:
        """The ``Set-Cookie`` headers of a sign-in: the session (``HttpOnly``,
        ``SameSite=Strict``) and the owner's CSRF token, for as long as it lasts."""
        max_age = max(0, int(session.expires_at - time.time()))
        sealed = self.seal(session)
        return [
            _cookie(SESSION_COOKIE, sealed, max_age, secure, "HttpOnly; SameSite=Strict"),
            _cookie(CSRF_COOKIE, self.csrf_token(owner), max_age, secure, "SameSite=Strict"),
        ]

    def end_session_headers(self, *, secure: bool) -> list[tuple[bytes, bytes]]:
        """The ``Set-Cookie`` headers that make a browser forget its session."""
        return [
            _cookie(SESSION_COOKIE, "", 0, secure, "HttpOnly; SameSite=Strict"),
            _cookie(CSRF_COOKIE, "", 0, secure, "SameSite=Strict"),
        ]


def _cookie(name: str, value: str, max_age: int, secure: bool, rest: str) -> tuple[bytes, bytes]:
    flags = "; Secure" if secure else ""
    return b"set-cookie", f"{name}={value}; Path=/; Max-Age={max_age}{flags}; {rest}".encode()
