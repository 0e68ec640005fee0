"""The read statements of long-term memory (``SQLReads``' memory methods), built once
from the tables like the rest of ``statements``; the writes are in ``fact_ops``."""

from __future__ import annotations

from functools import cache
from typing import Any

import sqlalchemy as sa

from ostinato.store.sql.tables import memories


def _param(column: sa.Column[Any], name: str) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=column.type)


_FACT_COLUMNS = ", ".join(f"memories.{c.name}" for c in memories.columns)


@cache
def get_memory() -> sa.Select[Any]:
    return sa.select(memories).where(memories.c.id == _param(memories.c.id, "id"))


@cache
def list_memories(include_closed: bool, paged: bool = False) -> sa.Select[Any]:
    """A scope's facts, newest recorded first; ``paged``: after fact ``:before`` in that
    order (by its recorded time, then id, as the order is)."""
    stmt = sa.select(memories).where(memories.c.scope == _param(memories.c.scope, "scope"))
    if not include_closed:
        stmt = stmt.where(memories.c.valid_to.is_(None))
    if paged:
        before = _param(memories.c.id, "before")
        cursor = memories.alias("cursor")
        at = sa.select(cursor.c.recorded_at).where(cursor.c.id == before).scalar_subquery()
        stmt = stmt.where(
            sa.or_(
                memories.c.recorded_at < at,
                sa.and_(memories.c.recorded_at == at, memories.c.id < before),
            )
        )
    return stmt.order_by(memories.c.recorded_at.desc(), memories.c.id.desc()).limit(
        sa.bindparam("limit", type_=sa.Integer)
    )


@cache
def holds_facts() -> sa.Select[Any]:
    """One row if ``:scope`` has a current fact, none if not: a probe of the scope's
    index, which ``SQLReads.search_memories`` makes before an FTS5 query on SQLite."""
    scope = _param(memories.c.scope, "scope")
    return (
        sa.select(sa.literal(1))
        .where(memories.c.scope == scope, memories.c.valid_to.is_(None))
        .limit(1)
    )


@cache
def search_memories(dialect: str) -> sa.TextClause:
    """Current facts of ``:scope`` matching ``:match``, best first, then a ``score``
    column (higher is better). ``:match`` comes from ``ostinato.store.search``."""
    if dialect == "postgresql":
        # search_vector: the stored, GIN-indexed document of migration 0003 (PostgreSQL
        # only, outside ``tables.metadata``).
        return sa.text(
            f"SELECT {_FACT_COLUMNS}, ts_rank(memories.search_vector, q) AS score"
            " FROM memories, websearch_to_tsquery('english', :match) AS q"
            " WHERE memories.scope = :scope AND memories.valid_to IS NULL"
            " AND memories.search_vector @@ q"
            " ORDER BY score DESC, memories.recorded_at DESC LIMIT :limit"
        )
    # bm25 is lower for a better match; the subject column weighs twice the text.
    return sa.text(
        f"SELECT {_FACT_COLUMNS}, -bm25(memories_fts, 1.0, 2.0) AS score"
        " FROM memories_fts JOIN memories ON memories.num = memories_fts.rowid"
        " WHERE memories_fts MATCH :match AND memories.scope = :scope"
        " AND memories.valid_to IS NULL"
        " ORDER BY bm25(memories_fts, 1.0, 2.0), memories.recorded_at DESC LIMIT :limit"
    )
