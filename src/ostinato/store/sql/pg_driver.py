"""A pooled PostgreSQL connection's asyncpg connection, for the statements the store sends
to the driver itself (``pg_writer``'s grouped writes, ``pg_reads``' reads, ``pg_tx``'s
transactions).

Taken from the pool as a raw connection (``AsyncEngine.raw_connection``), not through a
SQLAlchemy ``Connection``: the pool's checkout and return are all these statements need,
and a ``Connection`` made and closed around them cost 60 µs of CPU each time against
about 25 (a turn takes a pooled connection some twenty times).

``Drivers`` keeps a few of them between uses (``KEEP``, fewer for a small pool: one is
always left to the pool): a statement sent when one is idle costs no checkout and no
return at all, each of which is a pass through SQLAlchemy's greenlet bridge and its pool
(the 25 µs). A kept connection is in the state the pool would hand it out in: outside
any transaction block, or it is not kept.

A *relaxed* connection (``use(relaxed=True)``) commits without waiting for the WAL's
flush (``synchronous_commit`` off for its session): for a turn's own bookkeeping, which
SQLite answers at its commit too (``wal_sync.acknowledges``; docs/storage.md). One is
kept for that; one that is not kept has the setting reset before it goes back to the
pool, and one in an unknown state is invalidated, so no other use ever gets it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import greenlet_spawn

KEEP = 2  # connections kept between uses, at most
RELAX, UNRELAX = "SET synchronous_commit TO off", "RESET synchronous_commit"


@contextlib.asynccontextmanager
async def driver_of(engine: AsyncEngine) -> AsyncIterator[Any]:
    """The asyncpg connection of a connection taken from ``engine``'s pool, given back
    after. An error PostgreSQL answered with leaves it usable; anything else (a lost
    connection, a cancel in flight) leaves it in an unknown state: it is invalidated,
    never reused. So is one given back inside a transaction block (none should be)."""
    pooled = await engine.raw_connection()
    try:
        yield _driver(pooled)
    except BaseException as exc:
        await _given_back(pooled, usable=_answered(exc))
        raise
    else:
        await _given_back(pooled, usable=True)


class Drivers:
    """``driver_of`` for one store, with up to ``KEEP`` connections kept between uses
    (``close`` gives them back to the pool)."""

    __slots__ = ("_engine", "_idle", "_keep", "_keep_relaxed", "_relaxed")

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._idle: list[Any] = []  # pooled connections, outside any transaction
        self._relaxed: list[Any] = []  # the same, committing without waiting (at most one)
        size = getattr(engine.pool, "size", None)
        self._keep = max(0, min(KEEP, size() - 1)) if callable(size) else 0
        self._keep_relaxed = 1 if callable(size) and size() - 1 > self._keep else 0

    @contextlib.asynccontextmanager
    async def use(self, *, relaxed: bool = False) -> AsyncIterator[Any]:
        """An asyncpg connection: a kept one if one is idle, else one from the pool;
        ``relaxed``: one whose commits do not wait for the WAL's flush (when the pool
        leaves room to keep one; else an ordinary one)."""
        relaxed = relaxed and self._keep_relaxed > 0
        idle = self._relaxed if relaxed else self._idle
        pooled = idle.pop() if idle else await self._take(relaxed)
        try:
            yield _driver(pooled)
        except BaseException as exc:
            await self._back(pooled, usable=_answered(exc), relaxed=relaxed)
            raise
        else:
            await self._back(pooled, usable=True, relaxed=relaxed)

    async def call(self, method: str, *args: Any, relaxed: bool = False) -> Any:
        """``method`` of an asyncpg connection called with ``args``, on a connection as
        ``use`` gives one and given back the same way: one statement's whole use, without
        the context manager's generator and its passes (a few µs of a statement's CPU,
        some twenty-five times a turn)."""
        relaxed = relaxed and self._keep_relaxed > 0
        idle = self._relaxed if relaxed else self._idle
        pooled = idle.pop() if idle else await self._take(relaxed)
        driver = pooled.driver_connection
        try:
            found = await getattr(driver, method)(*args)
        except BaseException as exc:
            await self._back(pooled, usable=_answered(exc), relaxed=relaxed)
            raise
        if len(idle) < (self._keep_relaxed if relaxed else self._keep) and (
            not driver.is_in_transaction()
        ):
            idle.append(pooled)  # kept: ``_back``'s first case, without its coroutine
        else:
            await self._back(pooled, usable=True, relaxed=relaxed)
        return found

    async def _take(self, relaxed: bool) -> Any:
        pooled = await self._engine.raw_connection()
        if relaxed:
            try:
                await _driver(pooled).execute(RELAX)
            except BaseException:
                await _given_back(pooled, usable=False)
                raise
        return pooled

    async def _back(self, pooled: Any, *, usable: bool, relaxed: bool) -> None:
        usable = usable and not _driver(pooled).is_in_transaction()
        idle, room = (self._relaxed, self._keep_relaxed) if relaxed else (self._idle, self._keep)
        if usable and len(idle) < room:
            idle.append(pooled)
            return
        if usable and relaxed:  # back to the pool as the pool gave it
            try:
                await _driver(pooled).execute(UNRELAX)
            except BaseException as exc:
                await _given_back(pooled, usable=False)  # the setting may stay: never reused
                if isinstance(exc, Exception):
                    return  # what it was used for went through
                raise
        await _given_back(pooled, usable=usable)

    @property
    def kept(self) -> int:
        """How many are kept now (each checked out of the pool, idle)."""
        return len(self._idle) + len(self._relaxed)

    async def close(self) -> None:
        """Give the kept connections back to the pool (a relaxed one invalidated); none
        is kept after."""
        self._keep = self._keep_relaxed = 0
        while self._idle:
            await greenlet_spawn(self._idle.pop().close)
        while self._relaxed:
            await _given_back(self._relaxed.pop(), usable=False)


def _driver(pooled: Any) -> Any:
    driver = pooled.driver_connection
    assert driver is not None
    return driver


def _answered(exc: BaseException) -> bool:
    """An error PostgreSQL answered with: the connection is still usable."""
    import asyncpg

    return isinstance(exc, asyncpg.PostgresError)


async def _given_back(pooled: Any, *, usable: bool) -> None:
    """Back to the pool; invalidated (never reused) unless ``usable`` and outside any
    transaction block."""
    if not usable or _driver(pooled).is_in_transaction():
        await greenlet_spawn(pooled.invalidate)
    await greenlet_spawn(pooled.close)  # back to the pool (an invalidated one: gone)
