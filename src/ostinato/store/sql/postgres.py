"""``PostgresStore``: the store on PostgreSQL, through SQLAlchemy's asyncpg engine.

Each ``write()`` is one transaction on a pooled connection; its ops run through the
same ``apply_ops`` as SQLite's, via ``AsyncConnection.run_sync``. Concurrent appenders
to one conversation are serialised by locking the conversation's row before the
``seq`` is allocated; should two inserts still meet on one ``seq``,
the loser's ``ON CONFLICT DO NOTHING`` leaves its transaction intact and it retries
(READ COMMITTED, so the retry sees the winner's row).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from ostinato import observe
from ostinato.errors import StoreError
from ostinato.store.base import WriteOp
from ostinato.store.sql.holds import SQLHolds
from ostinato.store.sql.idempotency import SQLRequestKeys
from ostinato.store.sql.leases import LeaseTx
from ostinato.store.sql.migrate import migrate_postgres
from ostinato.store.sql.ops import apply_ops
from ostinato.store.sql.reads import SQLReads
from ostinato.store.sql.rows import MessageCache, Row, time_from_postgres, utc_time
from ostinato.store.sql.schedule_sql import SQLSchedules
from ostinato.store.sql.statements import WriteName, write_statements


class _ConnectionExecutor:
    """``ops.Executor`` over a SQLAlchemy ``Connection`` (inside ``run_sync``)."""

    serialise_appends = True  # other transactions append too

    _statements = write_statements("postgresql")

    def __init__(self, connection: sa.Connection) -> None:
        self._connection = connection

    def execute(self, name: WriteName, params: dict[str, Any]) -> int:
        return self._connection.execute(self._statements[name], params).rowcount

    def returning(self, name: WriteName, params: dict[str, Any]) -> Any:
        row = self._connection.execute(self._statements[name], params).first()
        return None if row is None else row[0]

    def row(self, name: WriteName, params: dict[str, Any]) -> Row | None:
        return self._connection.execute(self._statements[name], params).first()

    time = staticmethod(utc_time)
    read_time = staticmethod(time_from_postgres)


def _apply(connection: sa.Connection, ops: tuple[WriteOp, ...]) -> list[Any]:
    return apply_ops(_ConnectionExecutor(connection), ops)


T = TypeVar("T")


class _LeaseTx:
    """``leases.LeaseTx`` over a SQLAlchemy ``Connection`` (inside ``run_sync``)."""

    def __init__(self, connection: sa.Connection) -> None:
        self._connection = connection

    def execute(self, stmt: sa.Executable, params: dict[str, Any]) -> int:
        return self._connection.execute(stmt, params).rowcount

    def rows(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]:
        return self._connection.execute(stmt, params).all()


class PostgresStore(SQLHolds, SQLRequestKeys, SQLSchedules, SQLReads):
    """A ``Store`` on PostgreSQL. Open with ``await PostgresStore.open(url)``."""

    _decode_time = staticmethod(time_from_postgres)
    _dialect = "postgresql"

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        # Each read is one statement: run it outside a transaction (no BEGIN/ROLLBACK
        # round trips). Same pool as the writes.
        self._reads = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._message_cache = MessageCache()

    @classmethod
    async def open(cls, url: str | sa.URL, **engine_options: Any) -> PostgresStore:
        """Connect (``postgresql+asyncpg://...``), migrate to head, return the store.

        ``engine_options`` go to ``create_async_engine`` (e.g. ``pool_size``,
        ``connect_args``).
        """
        options: dict[str, Any] = {"pool_size": 10, "max_overflow": 20}
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

    async def write(self, *ops: WriteOp) -> list[Any]:
        """Commit ``ops`` in one transaction; one result per op."""
        if not ops:
            return []
        started = time.perf_counter()
        try:
            async with self.engine.begin() as connection:
                results = await connection.run_sync(_apply, ops)
            self._message_cache.written(results)
            return results
        except sa.exc.DBAPIError as exc:
            raise StoreError(f"postgresql: {exc.orig}") from exc
        finally:
            observe.store_write(time.perf_counter() - started)  # commit latency (metrics)

    async def _lease_write(self, work: Callable[[LeaseTx], T]) -> T:
        try:
            async with self.engine.begin() as connection:
                return await connection.run_sync(lambda sync: work(_LeaseTx(sync)))
        except sa.exc.DBAPIError as exc:
            raise StoreError(f"postgresql: {exc.orig}") from exc

    _bind_time = staticmethod(utc_time)

    async def _fetch(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]:
        try:
            async with self._reads.connect() as connection:
                result = await connection.execute(stmt, params)
                found: Sequence[Row] = result.all()
                return found
        except sa.exc.DBAPIError as exc:
            raise StoreError(f"postgresql: {exc.orig}") from exc

    async def close(self) -> None:
        await self.engine.dispose()
