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


def test_a_freed_statements_id_never_serves_another_statement() -> None:
    cache = CompiledCache()
    reused = 0
    for _ in range(300):
        # two statements of one shape (so the second is likely to take the first's
        # freed memory, and its id) that say different things
        stmt = sa.select(TABLE.c.a).where(TABLE.c.owner == sa.bindparam("owner"))
        assert ":owner" in cache.get(stmt).text
        before = id(stmt)
        del stmt
        probe = sa.select(TABLE.c.a).where(TABLE.c.a == sa.bindparam("a"))
        reused += id(probe) == before
        assert ":owner" not in cache.get(probe).text
        del probe
    assert reused, "no id was reused: the test did not reach the case it is for"
    assert len(cache) == 0  # a freed statement's entry goes with it


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
