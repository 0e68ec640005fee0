"""``SQLiteStore``: the embedded default, one SQLite file in WAL mode.

Writes go through ``SQLiteWriter`` (one connection, group commit, a thread for waits and
checkpoints). Reads run on reader connections, one per thread that reads (normally just
the event loop's), in autocommit mode: each select is its own WAL snapshot, so it sees
every write whose ``write()`` has returned. Reads are not sent to a thread: a WAL reader
never waits for the writer, and a read of one conversation costs tens of microseconds,
less than a hop to another thread would.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa

from ostinato import observe
from ostinato.errors import StoreError
from ostinato.observe import backend as observed
from ostinato.store.base import WriteOp
from ostinato.store.inflight import written
from ostinato.store.sql.holds import SQLHolds
from ostinato.store.sql.idempotency import SQLRequestKeys
from ostinato.store.sql.leases import LeaseTx
from ostinato.store.sql.migrate import migrate_sqlite, switch_to_wal
from ostinato.store.sql.protocol_sql import SQLProtocolRecords
from ostinato.store.sql.reads import SQLReads
from ostinato.store.sql.rows import MessageCache, Row, sqlite_time, time_from_sqlite
from ostinato.store.sql.schedule_sql import SQLSchedules
from ostinato.store.sql.search_sql import SQLITE_INDEX_REST, SQLITE_UNINDEXED
from ostinato.store.sql.spend_sql import SQLSpend
from ostinato.store.sql.sqlite_sql import CompiledCache
from ostinato.store.sql.sqlite_writer import SQLiteWriter, WriterBusy, WriterStats
from ostinato.store.sql.version_sql import SQLVersions
from ostinato.store.sql.wal_sync import Durability

# How long a connection waits for another process's write lock before giving up.
BUSY_TIMEOUT_MS = 60_000
T = TypeVar("T")


class _LeaseTx:
    """``leases.LeaseTx`` on a ``sqlite3`` connection: statements compiled once each."""

    def __init__(self, conn: sqlite3.Connection, compiled: CompiledCache) -> None:
        self._conn, self._compiled = conn, compiled

    def execute(self, stmt: sa.Executable, params: dict[str, Any]) -> int:
        sql = self._compiled.get(stmt)
        return self._conn.execute(sql.text, sql.defaults | params).rowcount

    def rows(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]:
        sql = self._compiled.get(stmt)
        return self._conn.execute(sql.text, sql.defaults | params).fetchall()


class SQLiteStore(
    SQLHolds, SQLRequestKeys, SQLSchedules, SQLSpend, SQLProtocolRecords, SQLVersions, SQLReads
):
    """A ``Store`` on one SQLite file. Open with ``await SQLiteStore.open(path)``."""

    _decode_time = staticmethod(time_from_sqlite)
    _dialect = "sqlite"

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        durability: Durability = "acknowledged",
    ) -> None:
        self.path = str(Path(path).expanduser().resolve())
        self._busy_timeout_ms = busy_timeout_ms
        synced = self.path if durability == "acknowledged" else None
        self._writer = SQLiteWriter(self._connect_writer, busy_timeout_ms, synced)
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._compiled = CompiledCache()
        self._closed = False
        self._message_cache = MessageCache()
        self._lease_conn: sqlite3.Connection | None = None  # leases write apart (``leases``)
        self._lease_lock = threading.Lock()

    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        durability: Durability = "acknowledged",
    ) -> SQLiteStore:
        """Create or migrate the file, then open the writer. ``durability``: whether a
        write that acknowledges something waits for the WAL's fsync (``wal_sync``)."""
        store = cls(path, busy_timeout_ms=busy_timeout_ms, durability=durability)
        Path(store.path).parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(migrate_sqlite, store.path, busy_timeout_ms)
        await asyncio.to_thread(store._writer.start)
        return store

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    @property
    def stats(self) -> WriterStats:
        """The writer's counters (calls, transactions, batches sent to its thread, ...)."""
        return self._writer.stats

    async def write(self, *ops: WriteOp) -> list[Any]:
        """Commit ``ops`` atomically (possibly in one transaction with other calls).

        If the awaiting task is cancelled, the write may still commit: its outcome is
        waited for, and the cancel carries its results (``store.inflight``).
        """
        if self._closed:
            raise StoreError("the store is closed")
        if not ops:
            return []
        timed = observed.HEARING  # its commit latency, for a backend that hears (metrics)
        started = time.perf_counter() if timed else 0.0
        inflight = self._writer.submit(ops)
        try:
            try:  # ``InFlight.wait``, without its coroutine
                results = await inflight.future
            except asyncio.CancelledError:
                await inflight.cancelled()  # raises the cancel, with what was written
        except asyncio.CancelledError as cancel:
            self._message_cache.written(written(cancel) or [])
            raise
        finally:
            if timed:
                observe.store_write(time.perf_counter() - started)
        self._message_cache.written(results)
        return results

    async def close(self) -> None:
        """Commit what is queued, stop the writer and close every connection."""
        if self._closed:
            return
        self._closed = True
        self._writer.flush()
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
        with self._lease_lock:
            if self._lease_conn is not None:
                self._lease_conn.close()
                self._lease_conn = None
        await asyncio.to_thread(self._writer.stop)  # the last close checkpoints: not here

    async def compact(self) -> None:
        """Leave no trace of deleted rows in the files: the full-text indexes merged
        (their deleted entries dropped), the database rebuilt (``VACUUM``: no free page
        keeps old bytes), the WAL checkpointed and truncated to nothing."""
        if self._closed:
            raise StoreError("the store is closed")
        await asyncio.to_thread(self._compact_now)

    def _compact_now(self) -> None:
        conn = self._connect()
        try:
            for fts in ("message_fts", "memories_fts"):
                conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            raise StoreError(f"sqlite: {exc}") from exc
        finally:
            conn.close()

    # --- leases -----------------------------------------------------------------------

    async def _lease_write(self, work: Callable[[LeaseTx], T]) -> T:
        """``work`` in a transaction of its own: on the writer's connection at once when
        it is free and nothing holds the write lock (``SQLiteWriter.alone_now``), else on
        a thread that waits for the lock."""
        if self._closed:
            raise StoreError("the store is closed")
        try:
            return self._writer.alone_now(lambda conn: work(_LeaseTx(conn, self._compiled)))
        except WriterBusy:
            pass
        except sqlite3.Error as exc:
            raise StoreError(f"sqlite: {exc}") from exc
        return await asyncio.to_thread(self._lease_write_now, work)

    def _lease_write_now(self, work: Callable[[LeaseTx], T]) -> T:
        """``work`` in a transaction on the lease connection, waiting for the write lock."""
        with self._lease_lock:
            conn = self._lease_conn
            if conn is None:
                conn = self._lease_conn = self._connect()
            try:
                conn.execute("BEGIN IMMEDIATE")
                result = work(_LeaseTx(conn, self._compiled))
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise StoreError(f"sqlite: {exc}") from exc
            except BaseException:  # e.g. a refusal decided inside the transaction
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return result

    _bind_time = staticmethod(sqlite_time)

    # --- connections ----------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, cached_statements=256
        )
        conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def _connect_writer(self) -> sqlite3.Connection:
        conn = self._connect()
        mode = switch_to_wal(conn, self._busy_timeout_ms)
        if mode != "wal":
            conn.close()
            raise StoreError(f"could not switch {self.path} to WAL mode (got {mode})")
        return conn

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StoreError("the store is closed")
            conn = self._connect()
            conn.execute("PRAGMA query_only = ON")
            with self._readers_lock:
                self._readers.append(conn)
            self._local.conn = conn
        return conn

    async def _fetch(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]:
        compiled = self._compiled.get(stmt)
        if compiled.defaults:
            params = compiled.defaults | params
        try:
            return self._reader().execute(compiled.text, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"sqlite: {exc}") from exc

    _fetch_planned = _fetch  # SQLite plans each statement as it runs it

    async def _search_ready(self) -> None:
        """Index the ``message_search`` rows FTS5 does not hold yet (migration 0021), in
        a transaction of its own, so the search that follows finds them."""
        if await self._fetch(SQLITE_UNINDEXED, {}):  # may be many rows: on a thread
            await asyncio.to_thread(self._lease_write_now, _index_rest)


def _index_rest(tx: LeaseTx) -> None:
    for stmt in SQLITE_INDEX_REST:
        tx.execute(stmt, {})
