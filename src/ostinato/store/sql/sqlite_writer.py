"""SQLite's single writer: one connection, group commit, a thread for the slow paths.

Every ``write()`` of a ``SQLiteStore`` goes through one ``sqlite3`` connection, so
writers in this process never compete for SQLite's write lock. The calls made during
one turn of the event loop are committed together (group commit): the first call of a
turn schedules a flush at the end of that turn, and the flush applies every call queued
by then in one transaction. Each call runs under a ``SAVEPOINT`` of its own, so a call
that fails is rolled back alone and its neighbours still commit; if the transaction
itself breaks, every call is retried in a transaction of its own.

Where the work runs:

- The flush commits on the event loop thread when it can start at once: in WAL mode
  with ``synchronous=NORMAL`` a commit appends a few pages to the WAL file without an
  fsync, which costs less than handing the work to another thread and back (thread
  wake-ups and GIL hand-offs dominate a small write otherwise).
- It never waits there. The connection's ``busy_timeout`` is 0; if another process (or
  another store on the same file) holds the write lock, or the connection is in use by
  the writer thread, the calls go to the writer thread, which waits for the lock with
  the long timeout and delivers results with one ``call_soon_threadsafe`` per batch.
- Checkpoints (copying the WAL back into the database, the only step that fsyncs) run
  in the writer thread on a connection of their own, never on the event loop; the
  writer connection's automatic checkpoints are off.

A ``write()`` returns only after its transaction committed, so any reader connection
that starts reading after that sees it.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from ostinato.errors import OstinatoError, StoreError
from ostinato.store.base import WriteOp
from ostinato.store.inflight import InFlight
from ostinato.store.sql.ops import apply_ops
from ostinato.store.sql.rows import Row, sqlite_time, time_from_sqlite
from ostinato.store.sql.sqlite_sql import compile_positional
from ostinato.store.sql.statements import WriteName, write_statements
from ostinato.store.sql.wal_sync import WalSync, acknowledges

# The most write() calls applied in one transaction.
MAX_BATCH = 512
# Checkpoint after this many write() calls (a call dirties a handful of pages, so this is
# near SQLite's own default of every 1,000 pages).
CHECKPOINT_EVERY = 256

Outcome: TypeAlias = "list[Any] | BaseException"
_CHECKPOINT = "checkpoint"
T = TypeVar("T")


class WriterBusy(Exception):
    """``alone_now`` could not start at once: the caller waits for the lock elsewhere."""


@dataclass(slots=True)
class WriterStats:
    """Counters of the writer (for tests and benchmarks)."""

    calls: int = 0  # write() calls applied
    transactions: int = 0  # transactions begun
    in_thread: int = 0  # batches handed to the writer thread
    fallbacks: int = 0  # batches that broke and were retried call by call
    checkpoints: int = 0  # checkpoints run by the writer thread


@dataclass(slots=True)
class _Call:
    """One queued ``write()``: its ops and where to deliver the outcome."""

    ops: tuple[WriteOp, ...]
    loop: asyncio.AbstractEventLoop
    inflight: InFlight
    durable: bool = False  # answered once the WAL is fsynced (``wal_sync``)


class _Executor:
    """``ops.Executor`` over the writer's cursor, running pre-compiled SQL text with
    positional parameters (``sqlite_sql.PositionalSQL``)."""

    serialise_appends = False  # the one writer: nothing else appends meanwhile

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor
        self._sql = {name: compile_positional(s) for name, s in write_statements("sqlite").items()}

    # Each runs the statement itself (no helper between): a step runs a dozen of these.
    def execute(self, name: WriteName, params: dict[str, Any]) -> int:
        text, values = self._sql[name]
        return self._cursor.execute(text, values(params)).rowcount

    def returning(self, name: WriteName, params: dict[str, Any]) -> Any:
        text, values = self._sql[name]
        row = self._cursor.execute(text, values(params)).fetchone()
        return None if row is None else row[0]

    def row(self, name: WriteName, params: dict[str, Any]) -> Row | None:
        text, values = self._sql[name]
        found: Row | None = self._cursor.execute(text, values(params)).fetchone()
        return found

    def rows(self, name: WriteName, params: dict[str, Any]) -> list[Row]:
        text, values = self._sql[name]
        return self._cursor.execute(text, values(params)).fetchall()

    time = staticmethod(sqlite_time)
    read_time = staticmethod(time_from_sqlite)


class SQLiteWriter:
    """The one writing connection of a SQLite file, and its thread for slow paths."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        busy_timeout_ms: int,
        database: str | None = None,
    ) -> None:
        """``database``: the file whose WAL is fsynced before a write that acknowledges
        something is answered (``wal_sync``); None answers every write at once."""
        self._connect = connect
        self._sync = None if database is None else WalSync(database, self._synced)
        self._busy_timeout_ms = busy_timeout_ms
        self._lock = threading.Lock()  # held by whoever uses the connection
        self._pending: dict[asyncio.AbstractEventLoop, list[_Call]] = {}
        self._queue: queue.SimpleQueue[list[_Call] | str | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="ostinato-sqlite-writer")
        self._thread.daemon = True
        self._written = 0  # calls since the last checkpoint was asked for
        self._checkpoint_queued = False
        self.stats = WriterStats()

    def start(self) -> None:
        """Open the writer connection and start the thread (blocking)."""
        self._conn = self._connect()
        self._conn.execute("PRAGMA busy_timeout = 0")
        self._conn.execute("PRAGMA wal_autocheckpoint = 0")
        self._cursor = self._conn.cursor()
        self._executor = _Executor(self._cursor)
        self._thread.start()
        if self._sync is not None:
            self._sync.start()

    def submit(self, ops: tuple[WriteOp, ...]) -> InFlight:
        """Queue ``ops`` as one all-or-nothing call; its outcome is one result per op."""
        loop = asyncio.get_running_loop()
        inflight = InFlight(loop)
        calls = self._pending.get(loop)
        if calls is None:
            calls = self._pending[loop] = []
            loop.call_soon(self._flush, loop)
        durable = self._sync is not None and acknowledges(ops)
        calls.append(_Call(ops, loop, inflight, durable))
        return inflight

    def flush(self) -> None:
        """Commit this loop's queued calls now instead of at the end of the turn."""
        self._flush(asyncio.get_running_loop())

    def stop(self) -> None:
        """Finish the calls handed to the thread, end it, close the connection (blocking)."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        if self._sync is not None:
            self._sync.stop()
        with self._lock:
            self._conn.close()

    # --- on the event loop --------------------------------------------------------

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        calls = self._pending.pop(loop, None)
        while calls:
            batch, calls = calls[:MAX_BATCH], calls[MAX_BATCH:]
            outcomes = None
            if self._lock.acquire(blocking=False):
                try:
                    outcomes = self._commit(batch, wait=False)
                finally:
                    self._lock.release()
            if outcomes is None:
                self.stats.in_thread += 1
                self._queue.put(batch)
            else:
                self.stats.calls += len(batch)
                self._written += len(batch)
                self._answer(list(zip(batch, outcomes, strict=True)))
        if self._written >= CHECKPOINT_EVERY:  # (``_maybe_checkpoint`` checks it again)
            self._maybe_checkpoint()

    def alone_now(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` in a transaction of its own on the writer connection, on this thread,
        now; ``WriterBusy`` if the connection is in use (the writer thread) or another
        connection holds the write lock, so the caller can wait on a thread instead.

        For small transactions that are not ``write()`` calls (a lease, a hold, a spend
        reservation): on the event loop this costs less than a hop to a thread and back,
        whose wake-ups and GIL hand-offs outweigh a statement or two.
        """
        if not self._lock.acquire(blocking=False):
            raise WriterBusy
        try:
            try:
                self._cursor.execute("BEGIN IMMEDIATE")  # busy_timeout is 0: never waits
            except sqlite3.Error as exc:
                if _busy(exc):
                    raise WriterBusy from None
                raise
            try:
                result = work(self._conn)
                self._cursor.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
            return result
        finally:
            self._lock.release()

    def _maybe_checkpoint(self) -> None:
        if self._written >= CHECKPOINT_EVERY and not self._checkpoint_queued:
            self._written = 0
            self._checkpoint_queued = True
            self._queue.put(_CHECKPOINT)

    # --- on whichever thread holds the lock ---------------------------------------

    def _commit(self, calls: list[_Call], *, wait: bool) -> list[Outcome] | None:
        """Apply ``calls`` in one transaction; None if that must be left to the thread.

        Without ``wait``, a held write lock or a broken batch returns None, undone.
        """
        self.stats.transactions += 1
        try:
            if wait:
                self._begin_waiting()
            else:  # on the loop: busy_timeout is 0, never waits
                self._cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            if not wait and _busy(exc):
                return None
            return [_as_store_error(exc) for _ in calls]
        if len(calls) == 1:
            return [self._commit_one(calls[0])]
        try:
            outcomes = self._commit_together(calls)
        except Exception:
            self._rollback()
            if not wait:
                return None
            self.stats.fallbacks += 1
            return [self._alone(call) for call in calls]
        return outcomes

    def _alone(self, call: _Call) -> Outcome:
        outcomes = self._commit([call], wait=True)
        assert outcomes is not None
        return outcomes[0]

    def _begin_waiting(self) -> None:
        """``BEGIN IMMEDIATE``, waiting for the write lock up to the long timeout."""
        self._cursor.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
        try:
            self._cursor.execute("BEGIN IMMEDIATE")
        finally:
            self._cursor.execute("PRAGMA busy_timeout = 0")

    def _commit_one(self, call: _Call) -> Outcome:
        """One call in the open transaction, then commit; its error if it failed."""
        try:
            result = apply_ops(self._executor, call.ops)
            self._cursor.execute("COMMIT")
        except Exception as exc:
            self._rollback()
            return _as_store_error(exc)
        return result

    def _commit_together(self, calls: list[_Call]) -> list[Outcome]:
        """Every call under a savepoint of its own, then commit; raises if that breaks."""
        execute = self._cursor.execute
        outcomes: list[Outcome] = []
        for call in calls:
            execute("SAVEPOINT call")
            try:
                outcomes.append(apply_ops(self._executor, call.ops))
            except Exception as exc:
                execute("ROLLBACK TO call")  # raises if the error ended the transaction
                outcomes.append(_as_store_error(exc))
            execute("RELEASE call")
        execute("COMMIT")
        return outcomes

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            self._cursor.execute("ROLLBACK")

    # --- the thread ---------------------------------------------------------------

    def _run(self) -> None:
        checkpointer: sqlite3.Connection | None = None
        try:
            while (item := self._queue.get()) is not None:
                if item == _CHECKPOINT:
                    checkpointer = checkpointer or self._connect()
                    self._checkpoint(checkpointer)
                elif isinstance(item, list):
                    self._synced(self._durable_now(item, self._commit_in_thread(item)), None)
        finally:
            if checkpointer is not None:
                checkpointer.close()

    def _commit_in_thread(self, calls: list[_Call]) -> list[Outcome]:
        """Commit ``calls``, waiting for the write lock; never lets an error end the thread."""
        try:
            with self._lock:
                outcomes = self._commit(calls, wait=True)
        except Exception as exc:  # a bug, not a database error: fail these calls alone
            outcomes = [StoreError(f"sqlite writer: {exc!r}") for _ in calls]
        assert outcomes is not None
        self.stats.calls += len(calls)
        self._written += len(calls)
        return outcomes

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        """Copy the WAL back into the database without blocking readers or the writer."""
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.stats.checkpoints += 1
        except sqlite3.Error:
            pass  # a checkpoint is an optimisation; the next one will try again
        finally:
            self._checkpoint_queued = False

    # --- durable commits (``wal_sync``) ------------------------------------------

    def _answer(self, pairs: list[tuple[_Call, Outcome]]) -> None:
        """On the event loop: answer the committed calls, a durable one once synced."""
        # (a list, not ``any`` of a generator: it runs every write)
        if self._sync is None or not [call for call, _ in pairs if call.durable]:
            _resolve(pairs)
            return
        waiting = [(c, o) for c, o in pairs if c.durable and not isinstance(o, BaseException)]
        _resolve([(c, o) for c, o in pairs if not c.durable or isinstance(o, BaseException)])
        self._sync.after_commit(waiting)

    def _durable_now(
        self, calls: list[_Call], outcomes: list[Outcome]
    ) -> list[tuple[_Call, Outcome]]:
        """On the writer thread: fsync the WAL there if a call of ``calls`` needs it."""
        pairs = list(zip(calls, outcomes, strict=True))
        if self._sync is not None and any(call.durable for call in calls):
            error = self._sync.sync_now()
            if error is not None:
                return [(c, _unsynced(error) if c.durable else o) for c, o in pairs]
        return pairs

    def _synced(self, pairs: list[tuple[_Call, Outcome]], error: Exception | None) -> None:
        """On a thread: hand ``pairs`` back (each as ``error`` says, if the fsync failed)."""
        if error is not None:
            pairs = [(call, _unsynced(error)) for call, _ in pairs]
        self._deliver([c for c, _ in pairs], [o for _, o in pairs])

    @staticmethod
    def _deliver(calls: list[_Call], outcomes: list[Outcome]) -> None:
        """Hand outcomes to their event loops, one wake-up per loop."""
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Call, Outcome]]] = {}
        for call, outcome in zip(calls, outcomes, strict=True):
            by_loop.setdefault(call.loop, []).append((call, outcome))
        for loop, pairs in by_loop.items():
            # A closed loop raises RuntimeError: nobody is waiting there any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, pairs)


def _resolve(pairs: list[tuple[_Call, Outcome]]) -> None:
    """On the calls' event loop: settle each call (kept for a caller cancelled meanwhile)."""
    for call, outcome in pairs:
        call.inflight.settle(outcome)


def _busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused because another connection holds the lock."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_BUSY


def _unsynced(error: Exception) -> StoreError:
    return StoreError(f"sqlite: committed, but the WAL could not be flushed to disk: {error}")


def _as_store_error(exc: Exception) -> BaseException:
    """Our own errors pass through; a driver error becomes a ``StoreError``."""
    if isinstance(exc, OstinatoError) or not isinstance(exc, sqlite3.Error):
        return exc
    error = StoreError(f"sqlite: {exc}")
    error.__cause__ = exc
    return error
