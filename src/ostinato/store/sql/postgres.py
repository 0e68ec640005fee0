"""``PostgresStore``: the store on PostgreSQL, through SQLAlchemy's asyncpg engine.

A ``write()`` that can be planned (a step's, a turn's start and end: ``speculate``)
goes to ``PostgresWriter``: one statement, grouped with the other writes of the same
pass of the event loop into one round trip and one commit (``pg_writer``). Any other
write, and a planned one PostgreSQL refused, is one transaction on a pooled connection
(``_write_in_transaction``): its ops run through the same ``apply_ops`` as SQLite's,
straight on asyncpg (``pg_tx``), as do the small transactions of the leases, holds,
spend and schedules (``_lease_write``; one of a single statement is that statement
alone, ``_lease_one``). There, concurrent appenders to one conversation are
serialised by locking the conversation's row before the ``seq`` is allocated; should
two inserts still meet on one ``seq``, the loser's ``ON CONFLICT DO NOTHING`` leaves
its transaction intact and it retries (READ COMMITTED, so the retry sees the winner's
row).

The pool and the statement caches are set by the URL's query (``engine_options``):
``pool_size`` (default 10) and ``max_overflow`` (20) size the pool, ``pool_timeout`` (30 s)
is how long a caller waits for a connection before ``StoreBusy`` (backpressure: 503 with
``Retry-After``, never a 500); ``statement_cache=off``
stops preparing named statements, for poolers that hand one client's statements to
another server connection (PgBouncer's transaction mode before 1.21).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from ostinato import observe
from ostinato.errors import StoreBusy, StoreError
from ostinato.observe import backend as observed
from ostinato.store.accounts import UpdateConversation
from ostinato.store.base import WriteOp, utcnow
from ostinato.store.inflight import settle_in_task, written
from ostinato.store.spend import Charge, SettleSpend
from ostinato.store.sql.holds import SQLHolds
from ostinato.store.sql.idempotency import SQLRequestKeys
from ostinato.store.sql.leases import LeaseTx
from ostinato.store.sql.meta import metadata
from ostinato.store.sql.migrate import migrate_postgres
from ostinato.store.sql.ops import apply_ops
from ostinato.store.sql.pg_driver import Drivers
from ostinato.store.sql.pg_reads import RawStatements
from ostinato.store.sql.pg_title import first_title, write_first_title
from ostinato.store.sql.pg_tx import NotRaw, RawTransactions, TxExecutor, rowcount, run_work
from ostinato.store.sql.pg_writer import PostgresWriter, WriterStats
from ostinato.store.sql.protocol_sql import SQLProtocolRecords
from ostinato.store.sql.reads import SQLReads
from ostinato.store.sql.rows import MessageCache, Row, time_from_postgres, utc_time
from ostinato.store.sql.schedule_sql import SQLSchedules
from ostinato.store.sql.speculate import plan
from ostinato.store.sql.spend_sql import SQLSpend
from ostinato.store.sql.statements import write_statements
from ostinato.store.sql.version_sql import SQLVersions
from ostinato.store.sql.wal_sync import acknowledges

POOL_SIZE, MAX_OVERFLOW, POOL_TIMEOUT_S = 10, 20, 30.0
# A transaction rolled back whole as a deadlock's victim (or a serialisation failure)
# changed nothing: it is run again, at most this many times.
RETRIES, _RETRIED = 3, frozenset({"40P01", "40001"})
# How a search is planned (``_fetch_planned``), for this transaction only: for its
# parameters' values, and with a random page read costed near a sequential one. A
# search reads the GIN index and then the rows it names, pages that a server answering
# searches keeps in memory; at PostgreSQL's default cost (4, for disks that seek) the
# planner walks the newest rows one by one instead, up to seven times slower for a word
# or a prefix held by a few percent of them (bench/search.py; docs/performance.md).
_CUSTOM_PLAN = sa.text(
    "SELECT set_config('plan_cache_mode', 'force_custom_plan', true),"
    " set_config('random_page_cost', '1.1', true)"
)


T = TypeVar("T")


class _LeaseTx:
    """``leases.LeaseTx`` over a SQLAlchemy ``Connection`` (inside ``run_sync``): the
    old way, for work with a statement that cannot be sent as text (``pg_tx.NotRaw``)."""

    def __init__(self, connection: sa.Connection) -> None:
        self._connection = connection

    def execute(self, stmt: sa.Executable, params: dict[str, Any]) -> int:
        return self._connection.execute(stmt, params).rowcount

    def rows(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]:
        return self._connection.execute(stmt, params).all()


class PostgresStore(
    SQLHolds, SQLRequestKeys, SQLSchedules, SQLSpend, SQLProtocolRecords, SQLVersions, SQLReads
):
    """A ``Store`` on PostgreSQL. Open with ``await PostgresStore.open(url)``."""

    _decode_time = staticmethod(time_from_postgres)
    _dialect = "postgresql"
    _window_in_one = True  # a round trip costs more than the statement (``tree_sql``)

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        # Each read is one statement: run it outside a transaction (no BEGIN/ROLLBACK
        # round trips). Same pool as the writes.
        self._reads = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._raw = RawStatements(engine.dialect)
        self._tx_sql = RawTransactions(engine.dialect)
        self._statements = write_statements("postgresql")
        self._message_cache = MessageCache()
        self._drivers = Drivers(engine)  # asyncpg connections, a few kept between uses
        self._writer = PostgresWriter(
            engine, self._drivers, self._statements, self._write_in_transaction
        )

    @classmethod
    async def open(cls, url: str | sa.URL, **engine_options: Any) -> PostgresStore:
        """Connect (``postgresql+asyncpg://...``), migrate to head, return the store.

        The URL's query may size the pool and switch the statement caches off
        (``engine_options``); ``engine_options`` given here go to
        ``create_async_engine`` as well (e.g. ``pool_size``, ``connect_args``) and win.
        """
        url, options = engine_options_of(url)
        options.update(engine_options)
        engine = create_async_engine(url, **options)
        try:
            await migrate_postgres(engine)
        except BaseException:
            await engine.dispose()
            raise
        return cls(engine)

    def __repr__(self) -> str:
        return f"PostgresStore({self.engine.url.render_as_string(hide_password=True)!r})"

    @property
    def stats(self) -> WriterStats:
        """The grouped writer's counters (writes, round trips, writes redone)."""
        return self._writer.stats

    async def write(self, *ops: WriteOp) -> list[Any]:
        """Commit ``ops`` atomically (possibly in one round trip with other calls); one
        result per op. If the awaiting task is cancelled, the write may still commit: its
        outcome is waited for, and the cancel carries its results (``store.inflight``)."""
        if not ops:
            return []
        timed = observed.HEARING  # its commit latency, for a backend that hears (metrics)
        started = time.perf_counter() if timed else 0.0
        try:
            planned = plan(ops)
            titled = first_title(ops) if planned is None else None
            if titled is not None:  # one statement (``pg_title``)
                inflight = settle_in_task(self._first_title(titled))
            elif planned is None:
                inflight = settle_in_task(self._write_in_transaction(ops))
            else:
                relaxed = not acknowledges(ops)  # a turn's bookkeeping (as on SQLite)
                inflight = self._writer.submit(planned, ops, relaxed=relaxed)
            results = await inflight.wait()
        except asyncio.CancelledError as cancel:
            self._message_cache.written(written(cancel) or [])
            raise
        finally:
            if timed:
                observe.store_write(time.perf_counter() - started)
        self._message_cache.written(results)
        return results

    async def _first_title(self, op: UpdateConversation) -> list[Any]:
        now = utcnow()
        fetch = self._fetch_in_transaction
        return [await write_first_title(op, now, fetch, time_from_postgres)]

    async def _fetch_in_transaction(self, stmt: sa.Executable, params: dict[str, Any]) -> Any:
        """One statement that writes, in a transaction of its own (sent alone: no
        ``BEGIN`` and ``COMMIT`` round trips); its rows."""
        try:
            sql = self._tx_sql.get(stmt)
        except NotRaw:
            return await self._lease_write(lambda tx: tx.rows(stmt, params))
        return sql.rows(await self._fetch_raw(sql.text, sql.args(params)))

    async def _write_in_transaction(self, ops: tuple[WriteOp, ...]) -> list[Any]:
        """``ops`` in a transaction of their own, statement by statement; a transaction
        PostgreSQL rolled back as a deadlock's victim is run again (``RETRIES`` times)."""
        statements = self._statements
        return await self._transaction(
            lambda tx: apply_ops(TxExecutor(tx, statements), ops), retries=RETRIES
        )

    async def _lease_write(self, work: Callable[[LeaseTx], T]) -> T:
        return await self._transaction(work)

    async def _lease_one(self, stmt: sa.Executable, params: dict[str, Any]) -> int:
        """One statement in a transaction of its own: sent alone, outside a transaction
        block, which PostgreSQL runs as one (no ``BEGIN`` and ``COMMIT`` round trips)."""
        try:
            sql = self._tx_sql.get(stmt)
        except NotRaw:
            return await self._lease_write(lambda tx: tx.execute(stmt, params))
        return rowcount(await self._execute_raw(sql.text, sql.args(params)))

    async def _lease_many(self, stmt: sa.Executable, params: Sequence[dict[str, Any]]) -> None:
        """One statement for each of ``params`` in one transaction: sent together, in one
        round trip (asyncpg's ``executemany``: one implicit transaction, all or none)."""
        try:
            sql = self._tx_sql.get(stmt)
        except NotRaw:
            await super()._lease_many(stmt, params)
            return
        if params:
            await self._on_driver("executemany", sql.text, [[sql.args(p) for p in params]])

    async def settle_spend(self, hold_id: str | None, charge: Charge) -> None:
        """A call's charge without a hold to read is a planned write (``speculate``):
        one statement, grouped with the other writes of the moment (``pg_writer``)."""
        if hold_id is None:
            await self.write(SettleSpend(None, charge))
        else:
            await super().settle_spend(hold_id, charge)

    async def _transaction(self, work: Callable[[LeaseTx], T], retries: int = 0) -> T:
        """``work`` in a transaction of its own, straight on asyncpg (``pg_tx``); one
        PostgreSQL rolled back as a deadlock's victim is run again, ``retries`` times."""
        import asyncpg

        for attempt in range(retries + 1):
            try:
                async with self._drivers.use() as driver:
                    outcome = await run_work(driver, self._tx_sql, work)
            except NotRaw:
                return await self._sqlalchemy_transaction(work)
            except asyncpg.PostgresError as exc:  # the server's answer: nothing broke
                if attempt < retries and exc.sqlstate in _RETRIED:
                    continue
                raise StoreError(f"postgresql: {exc}") from exc
            except sa.exc.TimeoutError as exc:
                raise pool_busy(exc) from exc
            except Exception as exc:  # the connection (given up by ``Drivers.use``)
                raise StoreError(f"postgresql: {exc!r}") from exc
            return outcome.unwrap()  # the work's own refusal, rolled back, is raised
        raise AssertionError("unreachable")

    async def _sqlalchemy_transaction(self, work: Callable[[LeaseTx], T]) -> T:
        """``work`` in a transaction through SQLAlchemy (one with a statement that
        cannot be sent as text)."""
        try:
            async with self.engine.begin() as connection:
                return await connection.run_sync(lambda sync: work(_LeaseTx(sync)))
        except sa.exc.DBAPIError as exc:
            raise StoreError(f"postgresql: {exc.orig}") from exc
        except sa.exc.TimeoutError as exc:
            raise pool_busy(exc) from exc

    _bind_time = staticmethod(utc_time)

    async def _fetch(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]:
        """One read, outside a transaction: straight on asyncpg for a statement the store
        reads again and again (``pg_reads``), else through SQLAlchemy."""
        raw = self._raw.get(stmt)
        if raw is not None:
            return raw.rows(await self._fetch_raw(raw.text, raw.args(params)))
        try:
            async with self._reads.connect() as connection:
                result = await connection.execute(stmt, params)
                found: Sequence[Row] = result.all()
                return found
        except sa.exc.DBAPIError as exc:
            raise StoreError(f"postgresql: {exc.orig}") from exc
        except sa.exc.TimeoutError as exc:
            raise pool_busy(exc) from exc

    async def _fetch_raw(self, text: str, args: list[Any]) -> list[Any]:
        found: list[Any] = await self._on_driver("fetch", text, args)
        return found

    async def _execute_raw(self, text: str, args: list[Any]) -> str:
        """One statement outside a transaction block; its command tag."""
        status: str = await self._on_driver("execute", text, args)
        return status

    async def _on_driver(self, method: str, text: str, args: list[Any]) -> Any:
        import asyncpg

        try:
            return await self._drivers.call(method, text, *args)
        except asyncpg.PostgresError as exc:  # the server's answer: nothing broke
            raise StoreError(f"postgresql: {exc}") from exc
        except sa.exc.TimeoutError as exc:
            raise pool_busy(exc) from exc
        except Exception as exc:  # the connection (given up by ``Drivers.call``)
            raise StoreError(f"postgresql: {exc!r}") from exc

    async def _fetch_planned(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]:
        """``_fetch``, with the statement planned for these parameters' values: a prepared
        statement run often gets a generic plan, which cannot tell a rare search word
        from a common one (``search_sql``)."""
        try:
            async with self.engine.begin() as connection:
                await connection.execute(_CUSTOM_PLAN)
                found: Sequence[Row] = (await connection.execute(stmt, params)).all()
                return found
        except sa.exc.DBAPIError as exc:
            raise StoreError(f"postgresql: {exc.orig}") from exc
        except sa.exc.TimeoutError as exc:
            raise pool_busy(exc) from exc

    async def compact(self) -> None:
        """``VACUUM`` ostinato's tables: the space of deleted rows is freed for reuse
        (no dump or query can read them once they are deleted and committed)."""
        names = ", ".join(sorted(metadata.tables))
        async with self.engine.connect() as conn:
            auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await auto.exec_driver_sql(f"VACUUM {names}")

    async def close(self) -> None:
        await self._writer.wait()
        await self._drivers.close()
        await self.engine.dispose()


def pool_busy(exc: sa.exc.TimeoutError) -> StoreBusy:
    """The pool's wait for a connection ran out: backpressure (503 with Retry-After)."""
    return StoreBusy(f"the database is busy (no pooled connection came free: {exc})", retry_after=1)


def engine_options_of(url: str | sa.URL) -> tuple[sa.URL, dict[str, Any]]:
    """The URL without the store's own query parameters, and the engine options they
    set: ``pool_size``, ``max_overflow``, ``pool_timeout`` (seconds a caller waits for a
    connection before ``StoreBusy``: 503 with Retry-After) and ``statement_cache``
    (``on``, the default, or ``off``: no named prepared statement is kept, by asyncpg or
    by SQLAlchemy, and the few SQLAlchemy still prepares get names of their own, so
    statements never clash on a pooler's shared server connections)."""
    parsed = sa.make_url(url) if isinstance(url, str) else url
    query = dict(parsed.query)
    options: dict[str, Any] = {
        "pool_size": _count(query.pop("pool_size", str(POOL_SIZE)), "pool_size", 1),
        "max_overflow": _count(query.pop("max_overflow", str(MAX_OVERFLOW)), "max_overflow", 0),
        "pool_timeout": _seconds(query.pop("pool_timeout", str(POOL_TIMEOUT_S))),
    }
    cache = query.pop("statement_cache", "on")
    if cache not in ("on", "off"):
        raise ValueError(f"statement_cache must be 'on' or 'off', not {cache!r}")
    if cache == "off":
        options["connect_args"] = {
            "statement_cache_size": 0,
            "prepared_statement_cache_size": 0,
            "prepared_statement_name_func": lambda: f"__ostinato_{uuid.uuid4().hex}__",
        }
    return parsed.set(query=query), options


def _seconds(raw: Any) -> float:
    text = raw if isinstance(raw, str) else str(raw[-1])
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise ValueError("pool_timeout in the database URL must be a number of seconds > 0")
    return value


def _count(raw: Any, name: str, least: int) -> int:
    text = raw if isinstance(raw, str) else str(raw[-1])
    if not text.isdigit() or int(text) < least:
        raise ValueError(f"{name} in the database URL must be a whole number >= {least}")
    return int(text)
