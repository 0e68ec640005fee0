"""Owners as the runtime sees them: plain strings.

The server resolves each caller into an owner (``ostinato.server.auth``); the runtime
carries it through the turn without knowing how it was resolved. Two kinds of owner are
told apart by their spelling alone:

- ``LOCAL_OWNER`` (``"local"``): the one person of a server in the default ``none`` mode;
- anonymous owners, ``anon:<random>``: a browser or client of a public demo that has not
  signed in. Tools that need an account do not run for them (``needs_account``).

Owners that keys and identity providers name may not take either spelling.
"""

from __future__ import annotations

LOCAL_OWNER = "local"
ANONYMOUS_PREFIX = "anon:"
OIDC_PREFIX = "oidc:"  # before a token's owner when keys are accepted too (mode keys,oidc)
OWNER_LIMIT = 200  # characters


def is_anonymous(owner: str | None) -> bool:
    """Whether ``owner`` is an anonymous caller's."""
    return owner is not None and owner.startswith(ANONYMOUS_PREFIX)


def check_owner_name(owner: str) -> str:
    """An owner a key or a token may name; ``ValueError`` saying why not."""
    if not owner or not owner.strip():
        raise ValueError("an owner cannot be empty")
    if len(owner) > OWNER_LIMIT:
        raise ValueError(f"an owner is at most {OWNER_LIMIT} characters")
    if any(ch < " " or ch == "\x7f" for ch in owner):
        raise ValueError("an owner cannot contain control characters")
    if owner == LOCAL_OWNER or owner.startswith(ANONYMOUS_PREFIX):
        raise ValueError(
            f"{LOCAL_OWNER!r} and names starting {ANONYMOUS_PREFIX!r} are reserved "
            "(the local owner, anonymous callers)"
        )
    if owner.startswith("conversation:"):
        raise ValueError("names starting 'conversation:' are reserved (ownerless scopes)")
    if owner.startswith(OIDC_PREFIX):
        raise ValueError(f"names starting {OIDC_PREFIX!r} are reserved (identity providers')")
    return owner
