"""``LeaseStore`` for both SQL engines: the ``servers`` table and the ``holder`` columns.

Each method is one small transaction of its own, apart from the store's write path (a
renewal every few seconds has no business in a turn's group commit): PostgreSQL runs it
on a pooled connection, straight on asyncpg (``pg_tx``; a transaction of one statement
is that statement alone, ``_lease_one``); SQLite on the writer's connection when it is
free, else on a connection of its own in a thread, under ``BEGIN IMMEDIATE``, waiting
for the write lock like any other writer of the file.

The clock is the store's: on PostgreSQL every time is ``now()`` in the statement, so
servers on several hosts judge expiry by one clock; on SQLite (one host) it is the
local clock, bound as a parameter.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import cache
from typing import Any, Protocol, TypeVar

import sqlalchemy as sa

from ostinato.store.base import utcnow
from ostinato.store.leases import LeaseView, ServerLease
from ostinato.store.sql.rows import Row, TimeDecoder
from ostinato.store.sql.tables import queued_inputs, servers, turns

T = TypeVar("T")


class LeaseTx(Protocol):
    """One open transaction: runs a statement, returns the rows it changed (or read)."""

    def execute(self, stmt: sa.Executable, params: dict[str, Any]) -> int: ...

    def rows(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]:
        """Run a statement that returns rows (a select, or a write with RETURNING)."""
        ...


def _param(column: sa.Column[Any], name: str) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=column.type)


def _clock(dialect: str) -> tuple[sa.ColumnElement[Any], sa.ColumnElement[Any]]:
    """The store's now, and now + ``:ttl`` seconds, as SQL for ``dialect``."""
    if dialect == "postgresql":
        seconds = sa.bindparam("ttl", type_=sa.Float())
        zeros: list[sa.ColumnElement[Any]] = [sa.literal_column("0")] * 6  # years .. minutes
        return sa.func.now(), sa.func.now() + sa.func.make_interval(*zeros, seconds)
    return _param(servers.c.renewed_at, "now"), _param(servers.c.expires_at, "expires_at")


@cache
def statements(dialect: str) -> dict[str, sa.Executable]:
    now, expiry = _clock(dialect)
    fixed = ("id", "host", "machine", "pid", "pid_start", "started_at")
    values = {name: _param(servers.c[name], name) for name in fixed}
    insert = sa.insert(servers).values({**values, "renewed_at": now, "expires_at": expiry})
    by_id = servers.c.id == _param(servers.c.id, "b_id")
    return {
        "forget": sa.delete(servers).where(by_id),
        "insert": insert,
        "renew": sa.update(servers).where(by_id).values(renewed_at=now, expires_at=expiry),
        "drop": sa.delete(servers).where(
            by_id, servers.c.expires_at == _param(servers.c.expires_at, "b_expires_at")
        ),
        "claim_turn": sa.update(turns)
        .where(
            turns.c.id == _param(turns.c.id, "b_id"),
            turns.c.holder.is_not_distinct_from(_param(turns.c.holder, "b_holder")),
        )
        .values(holder=_param(turns.c.holder, "holder")),
        "claim_queued": sa.update(queued_inputs)
        .where(
            queued_inputs.c.id == _param(queued_inputs.c.id, "b_id"),
            queued_inputs.c.status == sa.literal_column("'queued'"),
            queued_inputs.c.holder.is_not_distinct_from(_param(queued_inputs.c.holder, "b_holder")),
        )
        .values(holder=_param(queued_inputs.c.holder, "holder")),
        "list": sa.select(servers, now.label("now")).order_by(servers.c.started_at),
    }


class SQLLeases(ABC):
    """The lease methods of ``SQLiteStore`` and ``PostgresStore``."""

    _dialect: str
    _decode_time: TimeDecoder

    @abstractmethod
    async def _lease_write(self, work: Callable[[LeaseTx], T]) -> T:
        """Run ``work`` in a write transaction of its own; what it returns."""

    @abstractmethod
    def _bind_time(self, value: datetime) -> Any:
        """A timestamp as this engine binds it."""

    @abstractmethod
    async def _fetch(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]: ...

    def _clock_params(self, ttl: float) -> dict[str, Any]:
        """The clock's parameters: SQLite binds the local clock, PostgreSQL the ttl."""
        if self._dialect == "postgresql":
            return {"ttl": ttl}
        now = utcnow()
        return {
            "now": self._bind_time(now),
            "expires_at": self._bind_time(now + timedelta(seconds=ttl)),
        }

    async def _lease_one(self, stmt: sa.Executable, params: dict[str, Any]) -> int:
        """One statement in a transaction of its own; the rows it changed. (PostgreSQL
        sends it alone, in one round trip: ``PostgresStore._lease_one``.)"""
        return await self._lease_write(lambda tx: tx.execute(stmt, params))

    async def _lease_many(self, stmt: sa.Executable, params: Sequence[dict[str, Any]]) -> None:
        """One statement run for each of ``params``, all in one transaction of their own.
        (PostgreSQL sends them together, in one round trip: ``PostgresStore._lease_many``.)"""

        def work(tx: LeaseTx) -> None:
            for each in params:
                tx.execute(stmt, each)

        await self._lease_write(work)

    async def _change(self, name: str, params: dict[str, Any]) -> int:
        return await self._lease_one(statements(self._dialect)[name], params)

    async def acquire_lease(self, lease: ServerLease, ttl: float) -> ServerLease:
        params = {
            "b_id": lease.id,
            "id": lease.id,
            "host": lease.host,
            "machine": lease.machine,
            "pid": lease.pid,
            "pid_start": lease.pid_start,
            "started_at": self._bind_time(lease.started_at),
            **self._clock_params(ttl),
        }
        forget, insert = (statements(self._dialect)[name] for name in ("forget", "insert"))
        await self._lease_write(lambda tx: (tx.execute(forget, params), tx.execute(insert, params)))
        view = await self.list_leases()
        return next(found for found in view.leases if found.id == lease.id)

    async def renew_lease(self, lease_id: str, ttl: float) -> bool:
        return await self._change("renew", {"b_id": lease_id, **self._clock_params(ttl)}) > 0

    async def release_lease(self, lease_id: str) -> None:
        await self._change("forget", {"b_id": lease_id})

    async def list_leases(self) -> LeaseView:
        params = self._clock_params(0.0)
        found = await self._fetch(statements(self._dialect)["list"], params)
        decode = self._decode_time
        leases = [
            ServerLease(
                id=row[0],
                host=row[1],
                machine=row[2],
                pid=row[3],
                pid_start=row[4],
                started_at=decode(row[5]),
                renewed_at=decode(row[6]),
                expires_at=decode(row[7]),
            )
            for row in found
        ]
        now = decode(found[0][8]) if found else utcnow()
        return LeaseView(now, leases)

    async def drop_lease(self, lease_id: str, expires_at: datetime) -> bool:
        params = {"b_id": lease_id, "b_expires_at": self._bind_time(expires_at)}
        return await self._change("drop", params) > 0

    async def claim_turn(self, turn_id: str, holder_was: str | None, holder: str | None) -> bool:
        params = {"b_id": turn_id, "b_holder": holder_was, "holder": holder}
        return await self._change("claim_turn", params) > 0

    async def claim_queued(self, item_id: str, holder_was: str | None, holder: str | None) -> bool:
        params = {"b_id": item_id, "b_holder": holder_was, "holder": holder}
        return await self._change("claim_queued", params) > 0
