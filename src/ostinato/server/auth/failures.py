"""Why a token could not be checked. Kept apart from ``oidc`` so that catching these
does not import the JWT and HTTP libraries, which only mode ``oidc`` needs."""

from __future__ import annotations


class InvalidToken(Exception):
    """The token is refused; ``message`` says why (never the token itself)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class KeysUnavailable(Exception):
    """The issuer's keys could not be fetched: nothing can be checked right now."""
