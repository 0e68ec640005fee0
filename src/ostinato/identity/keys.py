"""API keys: how they look, how they are made, and how one is checked.

A key is ``ost_<id>_<secret>``: ``id`` names the stored row (``store.accounts.ApiKey``),
``secret`` is 32 random bytes (URL-safe base64). The store keeps the SHA-256 of the
secret, never the secret: a key is shown once, when it is made. A fast hash is right
here, unlike for passwords: the secret is long and random, so there is nothing to guess.
The stored hash and the presented one are compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from ostinato.identity.owners import check_owner_name
from ostinato.ids import new_id
from ostinato.store.accounts import ApiKey, CreateApiKey, RevokeApiKey
from ostinato.store.base import Store, utcnow

PREFIX = "ost_"
_KEY = re.compile(r"^ost_([0-9a-f]{27})_([A-Za-z0-9_-]{43})$")
_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


@dataclass(frozen=True, slots=True)
class PresentedKey:
    """A key as a caller sent it, split into the row it names and its secret."""

    key_id: str
    secret: str


def parse_key(text: str) -> PresentedKey | None:
    """The parts of a well-formed key; None for anything else."""
    match = _KEY.match(text)
    return PresentedKey(match[1], match[2]) if match else None


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def matches(key: ApiKey, presented: PresentedKey) -> bool:
    """Whether ``presented`` is ``key``'s secret (constant time)."""
    return hmac.compare_digest(key.secret_hash, hash_secret(presented.secret))


def parse_duration(text: str) -> timedelta:
    """``90d``, ``12h``, ``30m``, ``45s``, ``2w``; ``ValueError`` otherwise."""
    match = _DURATION.match(text)
    if not match or int(match[1]) == 0:
        raise ValueError(f"a duration is a positive number and a unit (s, m, h, d, w): {text!r}")
    return timedelta(seconds=int(match[1]) * _UNIT_S[match[2]])


async def create_key(
    store: Store, owner: str, name: str, *, expires_in: timedelta | None = None
) -> tuple[ApiKey, str]:
    """Make and store a key for ``owner``; returns the stored row and the key itself
    (the only time it exists outside the caller's hands)."""
    check_owner_name(owner)
    if not name.strip() or len(name) > 200 or "\x00" in name:
        raise ValueError("a key's name is 1 to 200 characters")
    secret = secrets.token_urlsafe(32)
    now = utcnow()
    key = ApiKey(
        id=new_id(),
        owner=owner,
        name=name.strip(),
        secret_hash=hash_secret(secret),
        created_at=now,
        expires_at=now + expires_in if expires_in is not None else None,
    )
    await store.write(CreateApiKey(key))
    return key, f"{PREFIX}{key.id}_{secret}"


async def revoke_key(store: Store, key_id: str, when: datetime | None = None) -> ApiKey:
    """Revoke a key (``NotFound`` if there is none by that id)."""
    (revoked,) = await store.write(RevokeApiKey(key_id, when or utcnow()))
    assert isinstance(revoked, ApiKey)
    return revoked
