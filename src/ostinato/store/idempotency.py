"""Idempotency keys in the store: which request a client's key stands for, and what it did.

A client that retries a request (its connection dropped, it timed out) sends the same
``Idempotency-Key`` again; the server answers the retry with what the first request did
instead of doing it twice (``server.idempotency`` decides; this module only keeps the
records). One ``RequestKey`` per (owner, key): the primary key, so of two requests that
arrive at once with one key (in one process or in two) exactly one inserts its record
and the other finds it. A record holds the fingerprint of the request it was made for
(a retry with another body is refused), and, once known, what the request produced: the
turn it began (read back from the store for the answer), or the answer itself (status
and JSON body) for a request whose answer is small and fixed (a new conversation).

Like leases, records are written apart from ``Store.write``: each method is one small
transaction of its own. A record lives until ``expires_at`` (the window configured for
retries); ``claim_request`` deletes the expired ones as it goes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from ostinato.store.base import utcnow

KEY_LIMIT = 200  # characters of a key (the header's value)

SETTLED_FIELDS = (
    "conversation_id",
    "turn_id",
    "after_seq",
    "queued_id",
    "queued_position",
    "status_code",
    "response",
)


@dataclass(frozen=True, slots=True)
class RequestKey:
    """One client key of one owner, and what its first request did so far."""

    owner: str
    key: str
    fingerprint: str  # a hash of the request (method, path, body) the key was first sent with
    created_at: datetime
    expires_at: datetime
    conversation_id: str | None = None
    turn_id: str | None = None  # the turn the request began, once it has begun
    after_seq: int | None = None  # the conversation's last seq before that turn's rows
    queued_id: str | None = None  # the queued input, when its message waited
    queued_position: int | None = None
    status_code: int | None = None  # the stored answer, for a request that has one
    response: str | None = None  # its JSON body, as text


@runtime_checkable
class RequestKeys(Protocol):
    """What ``server.idempotency`` needs from a store (every store here has it)."""

    async def claim_request(self, record: RequestKey) -> RequestKey | None:
        """Insert ``record`` unless its (owner, key) has a record that has not expired:
        ``None`` when inserted (the caller's request goes ahead), else that record."""
        ...

    async def settle_request(self, owner: str, key: str, **fields: Any) -> None:
        """Set some of ``SETTLED_FIELDS`` on the record (what the request produced)."""
        ...

    async def get_request(self, owner: str, key: str) -> RequestKey | None:
        """The record, unless there is none or it has expired."""
        ...

    async def release_request(self, owner: str, key: str) -> None:
        """Delete the record: the request stored nothing, so a retry tries again."""
        ...


class MemoryRequestKeys:
    """``RequestKeys`` for ``MemoryStore``."""

    @property
    def _request_keys(self) -> dict[tuple[str, str], RequestKey]:
        found: dict[tuple[str, str], RequestKey] | None = self.__dict__.get("_request_keys_")
        if found is None:
            found = self.__dict__["_request_keys_"] = {}
        return found

    async def claim_request(self, record: RequestKey) -> RequestKey | None:
        now = utcnow()
        for ident in [k for k, r in self._request_keys.items() if r.expires_at <= now]:
            del self._request_keys[ident]
        found = self._request_keys.get((record.owner, record.key))
        if found is not None:
            return found
        self._request_keys[(record.owner, record.key)] = record
        return None

    async def settle_request(self, owner: str, key: str, **fields: Any) -> None:
        unknown = set(fields) - set(SETTLED_FIELDS)
        if unknown:
            raise ValueError(f"not a settled field: {sorted(unknown)}")
        found = self._request_keys.get((owner, key))
        if found is not None:
            self._request_keys[(owner, key)] = dataclasses.replace(found, **fields)

    async def get_request(self, owner: str, key: str) -> RequestKey | None:
        found = self._request_keys.get((owner, key))
        return found if found is not None and found.expires_at > utcnow() else None

    async def release_request(self, owner: str, key: str) -> None:
        self._request_keys.pop((owner, key), None)
