"""PostgreSQL's group commit: a step's write in one statement, concurrent writes in one
round trip and one commit.

A ``write()`` whose ops can be planned (``speculate.plan``: a step's, a turn's start
and end) is sent as one statement: each of its statements becomes a data-modifying
``WITH`` part (``RETURNING`` what it changed), and the final ``SELECT`` divides by zero
unless every part changed a row, so a write whose assumption fails changes nothing.
One statement outside a transaction block needs no ``BEGIN`` or ``COMMIT``: one round
trip where the ordinary way (``PostgresStore._write_in_transaction``) takes one per
statement plus two.

Writes asked for during one pass of the event loop are grouped by shape (the names of
their statements) and each group is sent with asyncpg's ``fetchmany``: every write's
``Bind``/``Execute`` in one flight with one ``Sync``, so the group is one implicit
transaction, one round trip and one commit (one WAL flush) however many writes it
holds. Each write there is its own statement, so a later one sees an earlier one's
rows (two appends to one conversation take consecutive ``seq``s).

If PostgreSQL refuses a group (an assumption failed: an unknown row, a ``seq`` another
server took meanwhile; or any other error the server reports, after which nothing of
the group was applied), each of its writes is redone alone the ordinary way, which
finds out what is wrong and says so as always, or succeeds. A connection lost in
flight fails the group's writes with a ``StoreError`` (they may or may not have
committed, as with any commit whose answer is lost); they are not redone.

Statements go to asyncpg directly, on a connection taken from the store's pool; their
text is composed and compiled once per shape and prepared once per connection
(asyncpg's statement cache). A group of one write goes with ``fetch``, the same
statement and one round trip, without ``fetchmany``'s batching (about 6 µs of CPU less).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import visitors

from ostinato.errors import StoreBusy, StoreError
from ostinato.store.base import WriteOp
from ostinato.store.inflight import InFlight
from ostinato.store.sql.pg_driver import Drivers
from ostinato.store.sql.speculate import Plan
from ostinato.store.sql.statements import WriteName

# The most writes sent in one round trip (one implicit transaction).
MAX_BATCH = 256
# Shapes whose composed statement is kept (a few dozen occur; this only bounds memory).
MAX_SHAPES = 512

Slow = Callable[[tuple[WriteOp, ...]], Awaitable[list[Any]]]


@dataclass(frozen=True, slots=True)
class Composed:
    """One shape's statement: its text, where each positional parameter comes from (the
    plan's statement and parameter name), and which statement each value column is."""

    sql: str
    layout: tuple[tuple[int, str], ...]
    values: tuple[int, ...]

    def args(self, plan: Plan) -> list[Any]:
        statements = plan.statements
        return [statements[i].params[key] for i, key in self.layout]

    def results(self, plan: Plan, row: Sequence[Any]) -> list[Any]:
        found: list[Any] = [None] * len(plan.statements)
        for column, index in enumerate(self.values, start=1):  # column 0 is the check
            found[index] = row[column]
        return plan.resolve(found)


def compose(
    plan: Plan, statements: Mapping[WriteName, sa.Executable], dialect: sa.Dialect
) -> Composed:
    """The one statement of ``plan``'s shape (see the module's docstring)."""
    parts, checks, values, columns = [], [], [], []
    origin: dict[str, tuple[int, str]] = {}
    for index, planned in enumerate(plan.statements):
        stmt = _renamed(statements[planned.name], f"s{index}_", index, origin)
        if not planned.returning:
            stmt = stmt.returning(sa.literal_column("1").label("hit"))
        part = stmt.cte(f"s{index}")
        parts.append(part)
        checks.append(sa.exists(sa.select(sa.literal_column("1")).select_from(part)))
        if planned.returning:
            values.append(index)
            columns.append(sa.select(next(iter(part.c))).scalar_subquery())
    every = sa.case((sa.and_(*checks), sa.literal_column("1")), else_=sa.literal_column("0"))
    check = sa.literal_column("1").op("/")(every)  # division by zero: the write fails whole
    compiled = sa.select(check, *columns).compile(dialect=dialect)
    positions = compiled.positiontup or []
    return Composed(str(compiled), tuple(origin[key] for key in positions), tuple(values))


def _renamed(
    stmt: sa.Executable, prefix: str, index: int, origin: dict[str, tuple[int, str]]
) -> Any:
    """``stmt`` with each bind parameter renamed ``prefix + name`` (parts of one
    statement must not share names); ``origin`` learns where each came from."""

    def rename(element: Any, **_: Any) -> Any:
        if isinstance(element, sa.BindParameter):
            origin[prefix + element.key] = (index, element.key)
            return sa.bindparam(prefix + element.key, type_=element.type)
        return None

    return visitors.replacement_traverse(stmt, {}, rename)  # type: ignore[call-overload]


class _Refused(Exception):
    """PostgreSQL refused a group: nothing of it was applied."""


@dataclass(slots=True)
class _Call:
    plan: Plan
    ops: tuple[WriteOp, ...]
    inflight: InFlight
    relaxed: bool  # a turn's bookkeeping: committed without waiting for the WAL's flush


@dataclass(slots=True)
class WriterStats:
    """Counters of the writer (for tests and benchmarks)."""

    writes: int = 0  # planned writes sent
    round_trips: int = 0  # groups sent (each one statement text, one commit)
    redone: int = 0  # writes redone the ordinary way after a refused group
    deadlocks: int = 0  # groups PostgreSQL refused as a deadlock's victim


@dataclass(slots=True)
class PostgresWriter:
    """Sends planned writes in groups; ``slow`` is the ordinary way, for redoing."""

    engine: AsyncEngine
    drivers: Drivers
    statements: Mapping[WriteName, sa.Executable]
    slow: Slow
    stats: WriterStats = field(default_factory=WriterStats)
    _pending: list[_Call] = field(default_factory=list)
    _composed: dict[tuple[WriteName, ...], Composed] = field(default_factory=dict)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def submit(self, plan: Plan, ops: tuple[WriteOp, ...], *, relaxed: bool = False) -> InFlight:
        """Queue a planned write; it is sent at the end of this pass of the event loop
        (``relaxed``: on a connection that does not wait for the WAL's flush, grouped
        only with other such writes)."""
        loop = asyncio.get_running_loop()
        inflight = InFlight(loop)
        if not self._pending:
            loop.call_soon(self._flush)
        self._pending.append(_Call(plan, ops, inflight, relaxed))
        return inflight

    async def wait(self) -> None:
        """Until every group sent so far has its answer (for closing)."""
        while self._pending or self._tasks:
            if self._pending:
                self._flush()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _flush(self) -> None:
        calls, self._pending = self._pending, []
        groups: dict[tuple[tuple[WriteName, ...], bool], list[_Call]] = {}
        for call in calls:
            groups.setdefault((call.plan.shape, call.relaxed), []).append(call)
        for group in groups.values():
            group.sort(key=_in_lock_order)  # stable: one conversation's writes keep order
            for start in range(0, len(group), MAX_BATCH):
                task = asyncio.ensure_future(self._send(group[start : start + MAX_BATCH]))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _send(self, calls: list[_Call]) -> None:
        composed = self._compose(calls[0].plan)
        self.stats.writes += len(calls)
        self.stats.round_trips += 1
        try:
            args = [composed.args(c.plan) for c in calls]
            rows = await self._fetchmany(composed.sql, args, relaxed=calls[0].relaxed)
        except _Refused:
            self.stats.redone += len(calls)
            await asyncio.gather(*(self._alone(call) for call in calls))
            return
        except Exception as exc:
            error = _store_error(exc)
            for call in calls:
                call.inflight.settle(error)
            return
        except BaseException as exc:  # cancelled (the loop closing): the outcome is not known
            for call in calls:
                call.inflight.settle(exc)
            raise
        for call, row in zip(calls, rows, strict=True):
            call.inflight.settle(composed.results(call.plan, row))

    async def _alone(self, call: _Call) -> None:
        try:
            outcome: list[Any] | BaseException = await self.slow(call.ops)
        except Exception as exc:
            outcome = exc
        except BaseException as exc:
            call.inflight.settle(exc)
            raise
        call.inflight.settle(outcome)

    def _compose(self, plan: Plan) -> Composed:
        shape = plan.shape
        found = self._composed.get(shape)
        if found is None:
            found = compose(plan, self.statements, self.engine.dialect)
            if len(self._composed) < MAX_SHAPES:
                self._composed[shape] = found
        return found

    async def _fetchmany(self, sql: str, args: list[list[Any]], *, relaxed: bool) -> list[Any]:
        import asyncpg

        try:
            if len(args) == 1:  # a group of one (most, unless under load): a plain fetch
                rows: list[Any] = await self.drivers.call("fetch", sql, *args[0], relaxed=relaxed)
            else:
                rows = await self.drivers.call("fetchmany", sql, args, relaxed=relaxed)
        except asyncpg.PostgresError as exc:  # the server's answer: nothing applied
            if isinstance(exc, asyncpg.DeadlockDetectedError):
                self.stats.deadlocks += 1
            raise _Refused(str(exc)) from exc
        return rows


def _in_lock_order(call: _Call) -> str:
    """A group's writes go in the order of their conversations, so two groups in flight
    (on two servers) that append to the same conversations wait for each other in one
    order, never each for the other (a deadlock: a ``seq`` one inserted, the other
    inserting it too, waits for the first to end)."""
    return call.plan.conversation


def _store_error(exc: Exception) -> Exception:
    """A failed group's error as the store says it: a pool that had no connection to
    give is ``StoreBusy`` (backpressure), anything else a ``StoreError``."""
    if isinstance(exc, StoreError | StoreBusy):
        return exc
    if isinstance(exc, sa.exc.TimeoutError):
        message = f"the database is busy (no pooled connection came free: {exc})"
        return StoreBusy(message, retry_after=1)
    return StoreError(f"postgresql: {exc!r}")
