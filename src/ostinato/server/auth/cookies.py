"""Cookies and what protects them: the anonymous owner's cookie (signed, HttpOnly) and
the CSRF token that a state-changing request riding a cookie must echo in a header.

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

from itsdangerous import BadSignature, URLSafeSerializer

from ostinato.identity.owners import ANONYMOUS_PREFIX

ANONYMOUS_COOKIE = "ostinato_anon"
CSRF_COOKIE = "ostinato_csrf"
CSRF_HEADER = "x-csrf-token"
ANONYMOUS_TOKEN_HEADER = "x-ostinato-anonymous-token"
TOKEN_PREFIX = "anon."  # an anonymous token sent as a bearer token
YEAR_S = 365 * 86_400


class Cookies:
    """Signs and checks what the server hands out, under one secret."""

    def __init__(self, secret: str | None, *, secure: bool = True) -> None:
        self._secret = secret or secrets.token_urlsafe(32)
        self.generated = secret is None
        self.secure = secure
        self._anonymous = URLSafeSerializer(self._secret, salt="ostinato-anonymous")

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

    def set_cookie_headers(self, signed: str, owner: str) -> list[tuple[bytes, bytes]]:
        """The ``Set-Cookie`` headers that hand a browser its anonymous owner."""
        secure = "; Secure" if self.secure else ""
        common = f"; Path=/; Max-Age={YEAR_S}{secure}"
        return [
            (
                b"set-cookie",
                f"{ANONYMOUS_COOKIE}={signed}{common}; HttpOnly; SameSite=Lax".encode(),
            ),
            (
                b"set-cookie",
                f"{CSRF_COOKIE}={self.csrf_token(owner)}{common}; SameSite=Strict".encode(),
            ),
            (ANONYMOUS_TOKEN_HEADER.encode(), (TOKEN_PREFIX + signed).encode()),
        ]
