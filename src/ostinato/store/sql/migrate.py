"""Bring a database's schema to the newest Alembic revision, from code.

The revisions ship inside the package (``ostinato/store/migrations``) and are found by
package path, so migrating needs no ``alembic.ini`` and works from any directory.
Concurrent openers are serialised: SQLite by ``BEGIN IMMEDIATE`` (the write lock),
PostgreSQL by a transaction-scoped advisory lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

SCRIPT_LOCATION = "ostinato.store:migrations"
# pg_advisory_xact_lock key held while migrating ("ostinato" as a number).
_PG_LOCK_KEY = 0x6F7374696E61746F


def upgrade(connection: sa.Connection, revision: str = "head") -> None:
    """Migrate ``connection``'s database to ``revision`` inside its current transaction."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


def migrate_sqlite(path: str, busy_timeout_ms: int) -> None:
    """Create or upgrade the SQLite file at ``path`` and switch it to WAL (blocking)."""
    engine = sa.create_engine(sa.URL.create("sqlite", database=path), poolclass=sa.NullPool)

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # let BEGIN below be the only transaction
        dbapi_connection.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
        dbapi_connection.execute("PRAGMA journal_mode = WAL")
        dbapi_connection.execute("PRAGMA foreign_keys = ON")

    @sa.event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    try:
        with engine.begin() as connection:
            upgrade(connection)
    finally:
        engine.dispose()


async def migrate_postgres(engine: AsyncEngine) -> None:
    """Create or upgrade the PostgreSQL schema, one migrating process at a time."""
    async with engine.begin() as connection:
        await connection.execute(
            sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY}
        )
        await connection.run_sync(upgrade)
