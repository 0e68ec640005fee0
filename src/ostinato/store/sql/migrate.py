"""Bring a database's schema to the newest Alembic revision, from code.

The revisions ship inside the package (``ostinato/store/migrations``) and are found by
package path, so migrating needs no ``alembic.ini`` and works from any directory.
Concurrent openers are serialised: SQLite by ``BEGIN IMMEDIATE`` (the write lock),
PostgreSQL by a transaction-scoped advisory lock.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

log = logging.getLogger("ostinato.store")

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

SCRIPT_LOCATION = "ostinato.store:migrations"
# The newest revision in ostinato/store/migrations (a test checks that it is Alembic's
# head): a SQLite file already there opens without loading Alembic and the revisions,
# some 0.3 s of every restart.
HEAD_REVISION = "0022"
# pg_advisory_xact_lock key held while migrating ("ostinato" as a number).
_PG_LOCK_KEY = 0x6F7374696E61746F


def upgrade(connection: sa.Connection, revision: str = "head") -> None:
    """Migrate ``connection``'s database to ``revision`` inside its current transaction."""
    quiet_alembic()  # before the import: importing it logs its plugins
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    config.attributes["connection"] = connection
    if revision == "head" and ahead(connection, config):
        return
    command.upgrade(config, revision)


def ahead(connection: sa.Connection, config: Any) -> bool:
    """Whether a later release migrated the database (its revision is not one of this
    version's): during a rolling update the old servers run beside the new ones, and
    migrations only expand (docs/deploy.md), so this version runs on it as it is."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    current = MigrationContext.configure(connection).get_current_heads()
    known = {script.revision for script in ScriptDirectory.from_config(config).walk_revisions()}
    later = [revision for revision in current if revision not in known]
    if later:
        log.warning(
            "the database is at revision %s, written by a later release: running on it "
            "without migrating (migrations only expand)",
            ", ".join(later),
        )
    return bool(later)


def quiet_alembic() -> None:
    """Alembic's step-by-step lines (its plugins, each revision run) are for debugging: at
    INFO they would fill a first start's screen before the banner. Its loggers show
    warnings and errors, and everything when the root logger is at DEBUG; a level set on
    them elsewhere is kept."""
    alembic = logging.getLogger("alembic")
    if alembic.level == logging.NOTSET and logging.getLogger().level > logging.DEBUG:
        alembic.setLevel(logging.WARNING)


def switch_to_wal(connection: sqlite3.Connection, busy_timeout_ms: int) -> str:
    """Put the file in WAL mode (it stays so); the mode it is in after.

    SQLite answers a journal-mode change with "database is locked" at once, without
    waiting on its busy timeout, while another connection holds a lock: several stores
    opening one new file together (threads of one process, or servers starting side by
    side) would fail. The change is tried again until the busy timeout, and a file that
    another opener already switched needs nothing."""
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()
            return str(mode[0]).lower() if mode else ""
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            try:
                current = connection.execute("PRAGMA journal_mode").fetchone()
            except sqlite3.OperationalError:
                current = None
            if current and str(current[0]).lower() == "wal":
                return "wal"
            time.sleep(0.01)


def migrate_sqlite(path: str, busy_timeout_ms: int) -> None:
    """Create or upgrade the SQLite file at ``path`` and switch it to WAL (blocking). A
    file already at head is left as it is (the store's writer then switches it)."""
    if sqlite_at_head(path, busy_timeout_ms):
        return
    engine = sa.create_engine(sa.URL.create("sqlite", database=path), poolclass=sa.NullPool)

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # let BEGIN below be the only transaction
        dbapi_connection.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
        switch_to_wal(dbapi_connection, busy_timeout_ms)
        dbapi_connection.execute("PRAGMA foreign_keys = ON")

    @sa.event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    try:
        with engine.begin() as connection:
            upgrade(connection)
    finally:
        engine.dispose()


def sqlite_at_head(path: str, busy_timeout_ms: int) -> bool:
    """Whether the file at ``path`` is at ``HEAD_REVISION``.

    A new file, one at an older revision (or a newer one, which Alembic then refuses
    by name) or one whose version cannot be read is left to Alembic. An upgrade changes
    the version in the transaction that changes the schema, so a file read as at head
    while another opener migrates it is at head."""
    if not Path(path).is_file():
        return False
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
        try:
            versions = connection.execute("SELECT version_num FROM alembic_version").fetchall()
        except sqlite3.OperationalError:  # no such table: a file nothing migrated yet
            return False
        return versions == [(HEAD_REVISION,)]
    finally:
        connection.close()


async def migrate_postgres(engine: AsyncEngine) -> None:
    """Create or upgrade the PostgreSQL schema, one migrating process at a time."""
    async with engine.begin() as connection:
        await connection.execute(
            sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY}
        )
        await connection.run_sync(upgrade)
