"""SQLite's single writer: one thread, one connection, group commit.

Every ``write()`` of a ``SQLiteStore`` is queued to one thread that owns the only
writing ``sqlite3`` connection of the store, so writers in this process never compete
for SQLite's write lock and never see ``SQLITE_BUSY``. Other processes (or other store
instances on the same file) are waited for by ``busy_timeout``; each transaction starts
with ``BEGIN IMMEDIATE`` so that wait happens up front, where the busy handler applies.

Group commit: while one transaction commits, later ``write()`` calls pile up in the
queue; the thread then takes all of them and applies them in one transaction. Each
call runs inside its own ``SAVEPOINT``, so a call that fails is rolled back alone and
its neighbours still commit. If the batch itself breaks (the commit fails, or an error
ends the transaction), every call is retried in a transaction of its own.

Results go back to the event loop with one ``call_soon_threadsafe`` per batch. A
``write()`` returns only after its transaction committed, so any reader connection
that starts reading after that sees it.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeAlias

from ostinato.errors import OstinatoError, StoreError
from ostinato.store.base import WriteOp
from ostinato.store.sql.ops import apply_ops
from ostinato.store.sql.rows import sqlite_time
from ostinato.store.sql.sqlite_sql import compile_sqlite
from ostinato.store.sql.statements import WriteName, write_statements

# The most write() calls applied in one transaction.
MAX_BATCH = 512

Outcome: TypeAlias = "list[Any] | BaseException"


@dataclass(slots=True)
class WriterStats:
    """Counters of the writer thread (for tests and benchmarks)."""

    calls: int = 0  # write() calls applied
    transactions: int = 0  # transactions committed or rolled back
    fallbacks: int = 0  # batches that broke and were retried call by call


@dataclass(slots=True)
class _Call:
    """One queued ``write()``: its ops and where to deliver the outcome."""

    ops: tuple[WriteOp, ...]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[list[Any]]


class _Executor:
    """``ops.Executor`` over the writer's cursor, running pre-compiled SQL text."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor
        self._sql: dict[WriteName, str] = {}
        for name, stmt in write_statements("sqlite").items():
            compiled = compile_sqlite(stmt)
            assert not compiled.defaults, f"{name} binds values at build time"
            self._sql[name] = compiled.text

    def execute(self, name: WriteName, params: dict[str, Any]) -> int:
        return self._cursor.execute(self._sql[name], params).rowcount

    def returning(self, name: WriteName, params: dict[str, Any]) -> Any:
        row = self._cursor.execute(self._sql[name], params).fetchone()
        return None if row is None else row[0]

    time = staticmethod(sqlite_time)


class SQLiteWriter:
    """The writer thread of one SQLite file; ``submit`` queues a ``write()`` call."""

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._connect = connect
        self._queue: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._run, name="ostinato-sqlite-writer", daemon=True
        )
        self._started: Future[None] = Future()
        self._conn: sqlite3.Connection | None = None
        self.stats = WriterStats()

    def start(self) -> None:
        """Open the connection in the writer thread; raise here if that fails."""
        self._thread.start()
        self._started.result()

    def submit(self, ops: tuple[WriteOp, ...]) -> asyncio.Future[list[Any]]:
        """Queue ``ops`` as one all-or-nothing call; the future gets one result per op."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Any]] = loop.create_future()
        self._queue.put(_Call(ops, loop, future))
        return future

    def stop(self) -> None:
        """Finish every queued call, close the connection and end the thread (blocking)."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    # --- the thread ---------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._conn = self._connect()
            executor = _Executor(self._conn.cursor())
        except BaseException as exc:
            self._started.set_exception(exc)
            return
        self._started.set_result(None)
        try:
            running = True
            while running:
                calls, running = self._next_batch()
                if calls:
                    self._deliver(calls, self._commit(executor, calls))
        finally:
            self._conn.close()

    def _next_batch(self) -> tuple[list[_Call], bool]:
        """Wait for a call, then take every call already queued behind it.

        Returns the calls and whether to keep running (False once ``stop`` was asked).
        """
        calls: list[_Call] = []
        call = self._queue.get()
        while call is not None:
            calls.append(call)
            if len(calls) == MAX_BATCH:
                return calls, True
            try:
                call = self._queue.get_nowait()
            except queue.Empty:
                return calls, True
        return calls, False

    def _commit(self, executor: _Executor, calls: list[_Call]) -> list[Outcome]:
        self.stats.calls += len(calls)
        if len(calls) == 1:
            return [self._alone(executor, calls[0])]
        try:
            return self._together(executor, calls)
        except Exception:
            self._rollback()
            self.stats.fallbacks += 1
            return [self._alone(executor, call) for call in calls]

    def _together(self, executor: _Executor, calls: list[_Call]) -> list[Outcome]:
        """All calls in one transaction, each under a savepoint of its own."""
        assert self._conn is not None
        execute = self._conn.execute
        self.stats.transactions += 1
        execute("BEGIN IMMEDIATE")
        outcomes: list[Outcome] = []
        for call in calls:
            execute("SAVEPOINT call")
            try:
                outcomes.append(apply_ops(executor, call.ops))
            except Exception as exc:
                execute("ROLLBACK TO call")  # raises if the error ended the transaction
                outcomes.append(_as_store_error(exc))
            execute("RELEASE call")
        execute("COMMIT")
        return outcomes

    def _alone(self, executor: _Executor, call: _Call) -> Outcome:
        """One call in a transaction of its own."""
        assert self._conn is not None
        self.stats.transactions += 1
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            result = apply_ops(executor, call.ops)
            self._conn.execute("COMMIT")
        except Exception as exc:
            self._rollback()
            return _as_store_error(exc)
        return result

    def _rollback(self) -> None:
        assert self._conn is not None
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

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
    """Runs in the event loop: settle each call's future."""
    for call, outcome in pairs:
        if call.future.done():  # cancelled by its caller (the write may have committed)
            continue
        if isinstance(outcome, BaseException):
            call.future.set_exception(outcome)
        else:
            call.future.set_result(outcome)


def _as_store_error(exc: Exception) -> BaseException:
    """Our own errors pass through; a driver error becomes a ``StoreError``."""
    if isinstance(exc, OstinatoError) or not isinstance(exc, sqlite3.Error):
        return exc
    error = StoreError(f"sqlite: {exc}")
    error.__cause__ = exc
    return error
