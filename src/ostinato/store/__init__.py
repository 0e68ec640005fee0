"""Storage: rows with a per-conversation sequence, the source of truth.

``open_store(url)`` picks the engine from a URL:

- ``None``: the SQLite file ``./ostinato.db`` in the working directory
- ``memory://``: ``MemoryStore`` (in-process, nothing persisted)
- ``sqlite:///path`` or ``sqlite+aiosqlite:///path``: ``SQLiteStore``
- ``postgresql://``, ``postgres://`` or ``postgresql+asyncpg://...``: ``PostgresStore``

SQL stores are migrated to the newest schema as they open.
"""

from __future__ import annotations

from ostinato.store.base import Store
from ostinato.store.memory import MemoryStore
from ostinato.store.sql import PostgresStore, SQLiteStore, describe_url, parse_url


async def open_store(url: str | None = None) -> Store:
    """Open (and migrate) the store ``url`` names; ``ValueError`` if it names none we have."""
    target = parse_url(url)
    if target.kind == "memory":
        return MemoryStore()
    if target.kind == "sqlite":
        assert target.sqlite_path is not None
        return await SQLiteStore.open(target.sqlite_path)
    assert target.url is not None
    return await PostgresStore.open(target.url)


__all__ = ["MemoryStore", "PostgresStore", "SQLiteStore", "Store", "describe_url", "open_store"]
