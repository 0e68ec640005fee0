"""Storage: rows with a per-conversation sequence, the source of truth.

``open_store(url)`` picks the engine from a URL:

- ``None``: the SQLite file ``./ostinato.db`` in the working directory
- ``memory://``: ``MemoryStore`` (in-process, nothing persisted)
- ``sqlite:///path`` or ``sqlite+aiosqlite:///path``: ``SQLiteStore``
- ``postgresql://``, ``postgres://`` or ``postgresql+asyncpg://...``: ``PostgresStore``

SQL stores are migrated to the newest schema as they open. A PostgreSQL URL needs the
``postgres`` extra (``pip install 'ostinato[postgres]'``); without it ``open_store`` says
so in one sentence. The stores themselves (``MemoryStore`` too) are imported when first
used: importing the package (as the server does, for ``Store``) loads none of them.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import TYPE_CHECKING, Any, TypeGuard

from ostinato.store.base import Store
from ostinato.store.sql.urls import describe_url, parse_url

if TYPE_CHECKING:
    from ostinato.store.memory import MemoryStore
    from ostinato.store.sql.postgres import PostgresStore
    from ostinato.store.sql.sqlite import SQLiteStore

POSTGRES_EXTRA = "pip install 'ostinato[postgres]'"


async def open_store(url: str | None = None) -> Store:
    """Open (and migrate) the store ``url`` names; ``ValueError`` if it names none we have,
    or one whose driver is not installed."""
    target = parse_url(url)
    if target.kind == "memory":
        from ostinato.store.memory import MemoryStore

        return MemoryStore()
    if target.kind == "sqlite":
        from ostinato.store.sql.sqlite import SQLiteStore

        assert target.sqlite_path is not None
        return await SQLiteStore.open(target.sqlite_path, durability=target.durability)
    if importlib.util.find_spec("asyncpg") is None:
        raise ValueError(
            f"a PostgreSQL store needs the asyncpg driver, which is not installed: {POSTGRES_EXTRA}"
        )
    from ostinato.store.sql.postgres import PostgresStore

    assert target.url is not None
    return await PostgresStore.open(target.url)


def is_postgres(store: Store) -> TypeGuard[PostgresStore]:
    """Whether ``store`` is a ``PostgresStore``, without importing that module when no
    store of its kind was opened (it loads SQLAlchemy's asyncio layer and ORM, about a
    tenth of a SQLite server's start)."""
    module = sys.modules.get("ostinato.store.sql.postgres")
    return module is not None and isinstance(store, module.PostgresStore)


def __getattr__(name: str) -> Any:
    if name == "MemoryStore":
        from ostinato.store.memory import MemoryStore

        return MemoryStore
    if name in ("PostgresStore", "SQLiteStore"):
        from ostinato.store import sql

        return getattr(sql, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "MemoryStore",
    "PostgresStore",
    "SQLiteStore",
    "Store",
    "describe_url",
    "is_postgres",
    "open_store",
]
