"""The SQLite store's compiled-statement cache (``store.sql.sqlite_sql.CompiledCache``).

Statements are looked up by ``id()``; a statement built for one call and then freed can
leave its id to the next statement made. The crash test found the cost: a cached
statement was run with a freed statement's SQL (SQLite asked for a parameter the
request never had, a 500).
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from ostinato.store.sql.sqlite import SQLiteStore
from ostinato.store.sql.sqlite_sql import CompiledCache

TABLE = sa.table("t", sa.column("a"), sa.column("owner"))


def test_a_freed_statements_entry_goes_with_it() -> None:
    cache = CompiledCache()
    stmt = sa.select(TABLE.c.a).where(TABLE.c.owner == sa.bindparam("owner"))
    assert ":owner" in cache.get(stmt).text
    assert len(cache) == 1
    del stmt  # freed: its id may be given to the next object made
    assert len(cache) == 0


def test_an_entry_under_another_statements_id_is_never_used() -> None:
    """What a reused id would look like: an entry filed under ``id(probe)`` that was
    made for another statement. (Whether the allocator reuses an id is up to it, so
    the case is built by hand.)"""
    cache = CompiledCache()
    other = sa.select(TABLE.c.a).where(TABLE.c.owner == sa.bindparam("owner"))
    cache.get(other)
    probe = sa.select(TABLE.c.a).where(TABLE.c.a == sa.bindparam("a"))
    cache._entries[id(probe)] = cache._entries.pop(id(other))  # as if other's id were reused
    compiled = cache.get(probe)
    assert ":owner" not in compiled.text and ":a" in compiled.text


async def test_a_store_read_after_a_freed_statement(tmp_path: Path) -> None:
    """Through the store: a one-off statement read, freed, then the cached reads."""
    store = await SQLiteStore.open(tmp_path / "s.db")
    try:
        approvals = sa.table("approvals", sa.column("id"), sa.column("conversation_id"))
        for _ in range(200):
            one_off = sa.select(approvals.c.id).where(approvals.c.id == sa.bindparam("owner"))
            assert await store._fetch(one_off, {"owner": "ann"}) == []
            del one_off
            other = sa.select(approvals.c.id).where(approvals.c.conversation_id == "x")
            assert await store._fetch(other, {}) == []
    finally:
        await store.close()
