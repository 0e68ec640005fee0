"""The SQL store: SQLite (embedded default) and PostgreSQL, one schema, one op path.

Modules, by what they hold:

- ``tables``: the schema (one ``MetaData``), which the Alembic migrations follow.
- ``statements``: every statement, built once as SQLAlchemy Core.
- ``ops`` (and ``fact_ops`` for memory facts): how each write op becomes statements,
  written once over an ``Executor`` (``executor``).
- ``rows``: rows back into ``Conversation``, ``Turn``, ``Message``, ``ToolCallRecord``,
  ``Approval``, ``Grant`` and ``QueuedInput``.
- ``reads``: the read methods, shared by both stores.
- ``sqlite`` / ``sqlite_writer`` / ``sqlite_sql``: ``SQLiteStore``, its writer thread
  with group commit, and statements compiled to SQLite text.
- ``postgres``: ``PostgresStore`` on SQLAlchemy's asyncpg engine.
- ``migrate``: Alembic upgrades run from code at open.
- ``urls``: store URLs, parsed and described.

The stores are imported when first named (SQLAlchemy and Alembic are not small), so
importing ``ostinato.store`` or ``ostinato.server`` costs nothing of theirs.
"""

from typing import TYPE_CHECKING, Any

from ostinato.store.sql.urls import describe_url, parse_url

if TYPE_CHECKING:
    from ostinato.store.sql.postgres import PostgresStore
    from ostinato.store.sql.sqlite import SQLiteStore

__all__ = ["PostgresStore", "SQLiteStore", "describe_url", "parse_url"]


def __getattr__(name: str) -> Any:
    if name == "PostgresStore":
        from ostinato.store.sql.postgres import PostgresStore

        return PostgresStore
    if name == "SQLiteStore":
        from ostinato.store.sql.sqlite import SQLiteStore

        return SQLiteStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
