"""Leases in the store: which server processes are alive, and who holds what.

A server process that runs turns holds one lease: a ``servers`` row (``ServerLease``)
that it renews while it lives. Each turn and each queued input it takes on carries the
lease's id as its ``holder``. Whether a holder is gone (and its turns may be recovered)
is decided by ``ostinato.leases`` from these rows; this module only keeps them.

Leases are written apart from ``Store.write``: each method is one small transaction of
its own. Taking something over is a compare-and-set on its ``holder`` (``claim_turn``,
``claim_queued``): of two processes that both judge a holder gone, one wins, and the
other leaves that turn alone. Times are the store's clock: PostgreSQL's ``now()`` (so
servers on several hosts agree), the local clock for SQLite (one host by nature) and
for ``MemoryStore``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from ostinato.store.base import QueuedInput, Turn, utcnow


@dataclass(frozen=True, slots=True)
class ServerLease:
    """One live (or dead, not yet noticed) server process.

    ``machine`` says where it runs, precisely enough to check its ``pid``: the host name,
    the boot and the pid namespace (``ostinato.leases.this_process``); ``pid_start``
    tells a pid reused by another process apart.
    """

    id: str
    host: str
    machine: str
    pid: int
    pid_start: str | None
    started_at: datetime
    renewed_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class LeaseView:
    """Every lease, read at ``now`` by the store's clock."""

    now: datetime
    leases: list[ServerLease]


@runtime_checkable
class LeaseStore(Protocol):
    """What ``ostinato.leases`` needs from a store (every store here has it)."""

    async def acquire_lease(self, lease: ServerLease, ttl: float) -> ServerLease:
        """Write (or rewrite) the lease, valid for ``ttl`` seconds from the store's now;
        the lease as stored."""
        ...

    async def renew_lease(self, lease_id: str, ttl: float) -> bool:
        """Push the lease's expiry to ``ttl`` seconds from now; False if it is gone (it was
        released, or another process judged it dead and dropped it)."""
        ...

    async def release_lease(self, lease_id: str) -> None: ...

    async def list_leases(self) -> LeaseView: ...

    async def drop_lease(self, lease_id: str, expires_at: datetime) -> bool:
        """Delete a dead process's lease, unless it was renewed since it was read (its
        expiry is no longer ``expires_at``); whether it was deleted."""
        ...

    async def claim_turn(self, turn_id: str, holder_was: str | None, holder: str | None) -> bool:
        """Make ``holder`` the turn's holder if it still is ``holder_was``."""
        ...

    async def claim_queued(self, item_id: str, holder_was: str | None, holder: str | None) -> bool:
        """Make ``holder`` the queued input's holder if it is still queued and still held
        by ``holder_was``."""
        ...


class MemoryLeases:
    """``LeaseStore`` for ``MemoryStore`` (one process: the local clock)."""

    _turns: dict[str, Turn]
    _queue: dict[str, QueuedInput]
    _leases: dict[str, ServerLease]

    async def acquire_lease(self, lease: ServerLease, ttl: float) -> ServerLease:
        now = utcnow()
        stored = dataclasses.replace(lease, renewed_at=now, expires_at=now + timedelta(seconds=ttl))
        self._leases[lease.id] = stored
        return stored

    async def renew_lease(self, lease_id: str, ttl: float) -> bool:
        found = self._leases.get(lease_id)
        if found is None:
            return False
        await self.acquire_lease(found, ttl)
        return True

    async def release_lease(self, lease_id: str) -> None:
        self._leases.pop(lease_id, None)

    async def list_leases(self) -> LeaseView:
        return LeaseView(utcnow(), list(self._leases.values()))

    async def drop_lease(self, lease_id: str, expires_at: datetime) -> bool:
        found = self._leases.get(lease_id)
        if found is None or found.expires_at != expires_at:
            return False
        del self._leases[lease_id]
        return True

    async def claim_turn(self, turn_id: str, holder_was: str | None, holder: str | None) -> bool:
        turn = self._turns.get(turn_id)
        if turn is None or turn.holder != holder_was:
            return False
        self._turns[turn_id] = dataclasses.replace(turn, holder=holder)
        return True

    async def claim_queued(self, item_id: str, holder_was: str | None, holder: str | None) -> bool:
        item = self._queue.get(item_id)
        if item is None or item.status != "queued" or item.holder != holder_was:
            return False
        self._queue[item_id] = dataclasses.replace(item, holder=holder)
        return True


@runtime_checkable
class ConversationHolds(Protocol):
    """Which server runs a conversation's turns (``ostinato.holds``; the SQL stores)."""

    async def claim_conversation(self, conversation_id: str, holder: str, token: str) -> bool:
        """Hold the conversation for ``holder``'s worker ``token`` if nobody live holds it
        (or ``holder`` does); whether it is held now."""
        ...

    async def release_conversation(self, conversation_id: str, token: str) -> None:
        """Drop the hold if worker ``token`` still has it."""
        ...

    async def held_elsewhere(self, conversation_id: str, holder: str) -> bool: ...
