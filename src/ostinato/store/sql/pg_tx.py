"""PostgreSQL's transactions of their own straight on asyncpg: the lease path's small
transactions (a conversation's hold, a renewal, a spend settled, a schedule claimed) and
the writes that are not planned (``PostgresStore._write_in_transaction``).

Through SQLAlchemy each statement of such a transaction cost about 150 µs of CPU on top
of the driver's (the execution layer, the ``BEGIN`` and ``COMMIT`` through its adapter),
and a hold claimed and released a millisecond. Here the work functions stay as they are,
synchronous (SQLite runs them on its own connection): ``run_work`` runs one in a
greenlet (SQLAlchemy's own bridge, ``greenlet_spawn``), and each statement it asks for
is sent to the pooled connection's asyncpg connection as text compiled once
(``RawTransactions``, with the values SQLAlchemy would bind and the rows it would give:
``pg_reads.compile_raw``), inside ``BEGIN`` and ``COMMIT`` sent by asyncpg. The
transaction is the same as before: the database's default isolation (READ COMMITTED),
every statement in it or none, a refusal the work raises rolls it back.

A statement whose text alone would not run it (a list it expands) is not sent this way:
the work's transaction is rolled back and the work run again the old way, through
SQLAlchemy (``NotRaw``); none of the store's own statements is such a one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import sqlalchemy as sa
from sqlalchemy.util import await_only, greenlet_spawn

from ostinato.store.sql.by_statement import ByStatement
from ostinato.store.sql.leases import LeaseTx
from ostinato.store.sql.pg_reads import RawSQL, compile_raw
from ostinato.store.sql.rows import Row, time_from_postgres, utc_time
from ostinato.store.sql.statements import WriteName

T = TypeVar("T")


class NotRaw(Exception):
    """A statement of the work cannot be sent as text: run the work SQLAlchemy's way."""


class RawTransactions(ByStatement["RawSQL | None"]):
    """Each statement's ``RawSQL``, compiled at its first use (the statements of these
    transactions are built once, at import or once per dialect) and kept by the object
    itself (``by_statement``)."""

    __slots__ = ("_dialect",)

    def __init__(self, dialect: sa.Dialect) -> None:
        super().__init__()
        self._dialect = dialect

    def get(self, stmt: sa.Executable) -> RawSQL:
        """``stmt``'s text for asyncpg; ``NotRaw`` if it has none."""
        found = self.find(stmt)
        if found is None:
            found = compile_raw(stmt, self._dialect)
            if found is None:
                raise NotRaw(str(stmt))
            self.keep(stmt, found)
        return found


def rowcount(status: str) -> int:
    """The rows a statement changed (or read), from its command tag (``UPDATE 2``,
    ``INSERT 0 1``), as SQLAlchemy's asyncpg adapter reads it."""
    last = status.rpartition(" ")[2]
    return int(last) if last.isdigit() else -1


class RawTx:
    """``leases.LeaseTx`` on an asyncpg connection, for work run by ``run_work``."""

    __slots__ = ("_compiled", "_driver", "failed")

    def __init__(self, driver: Any, compiled: RawTransactions) -> None:
        self._driver, self._compiled = driver, compiled
        self.failed: BaseException | None = None  # the driver's error, if one came

    def execute(self, stmt: sa.Executable, params: dict[str, Any]) -> int:
        sql = self._compiled.get(stmt)
        return rowcount(self._wait(self._driver.execute(sql.text, *sql.args(params))))

    def rows(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]:
        sql = self._compiled.get(stmt)
        found: list[Any] = self._wait(self._driver.fetch(sql.text, *sql.args(params)))
        return sql.rows(found)

    def _wait(self, awaitable: Any) -> Any:
        try:
            return await_only(awaitable)
        except BaseException as exc:
            self.failed = exc
            raise


class TxExecutor:
    """``ops.Executor`` over a ``LeaseTx`` (a ``RawTx``, or SQLAlchemy's for work that
    cannot be sent as text): the write ops' named statements."""

    serialise_appends = True  # other transactions append too
    time = staticmethod(utc_time)
    read_time = staticmethod(time_from_postgres)

    __slots__ = ("_statements", "_tx")

    def __init__(self, tx: LeaseTx, statements: Mapping[WriteName, sa.Executable]) -> None:
        self._tx, self._statements = tx, statements

    def execute(self, name: WriteName, params: dict[str, Any]) -> int:
        return self._tx.execute(self._statements[name], params)

    def returning(self, name: WriteName, params: dict[str, Any]) -> Any:
        found = self._tx.rows(self._statements[name], params)
        return found[0][0] if found else None

    def row(self, name: WriteName, params: dict[str, Any]) -> Row | None:
        found = self._tx.rows(self._statements[name], params)
        return found[0] if found else None

    def rows(self, name: WriteName, params: dict[str, Any]) -> Sequence[Row]:
        return self._tx.rows(self._statements[name], params)


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """What ``run_work`` gives back: the work's value, or the error it raised (after
    its transaction was rolled back; the connection is fine)."""

    value: T | None = None
    error: Exception | None = None

    def unwrap(self) -> T:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


async def run_work(
    driver: Any, compiled: RawTransactions, work: Callable[[RawTx], T]
) -> Outcome[T]:
    """``work`` in a transaction of its own on ``driver`` (an asyncpg connection).

    An error of the driver's (PostgreSQL refused a statement, the connection broke) is
    raised, after a rollback where the connection still answers; so is ``NotRaw``. An
    error the work raised itself is rolled back and given back in the ``Outcome``. A
    cancel is raised as it is: the transaction is left open, and the caller must throw
    the connection away (``pg_driver.Drivers.use`` does)."""
    transaction = driver.transaction()
    await transaction.start()
    tx = RawTx(driver, compiled)
    try:
        value = await greenlet_spawn(work, tx)
    except Exception as exc:
        await transaction.rollback()
        if tx.failed is not None or isinstance(exc, NotRaw):
            raise
        return Outcome(error=exc)
    if tx.failed is not None:  # the work went on after a refused statement
        await transaction.rollback()
        raise tx.failed
    await transaction.commit()
    return Outcome(value)
