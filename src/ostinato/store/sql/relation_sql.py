"""Relations between memory facts in SQL, for both engines: the write statements their
ops run (by name, through the ``Executor``; the ops are in ``fact_ops``), the read, and
decoding a row."""

from __future__ import annotations

from functools import cache
from typing import Any, Literal, TypeAlias

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ostinato.store.relations import MemoryRelation
from ostinato.store.sql.rows import Row, TimeDecoder
from ostinato.store.sql.tables import memory_relations

RelationWriteName: TypeAlias = Literal["insert_relation", "find_relation"]

_KEY = ("source", "relation", "target")


def _p(name: str) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=memory_relations.c[name].type)


def relation_statements(dialect: str) -> dict[Any, sa.Executable]:
    """The write statements of relation ops for ``dialect``, by ``RelationWriteName``."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    columns = [c.name for c in memory_relations.columns]
    return {
        # Relating two facts again changes nothing: the first relation stays.
        "insert_relation": insert(memory_relations)
        .values({name: _p(name) for name in columns})
        .on_conflict_do_nothing(index_elements=list(_KEY)),
        "find_relation": sa.select(memory_relations).where(
            *(memory_relations.c[name] == _p(name) for name in _KEY)
        ),
    }


@cache
def relations_of() -> sa.Select[Any]:
    """Relations of a scope with one fact at either end, oldest first."""
    fact = sa.bindparam("memory_id", type_=memory_relations.c.source.type)
    return (
        sa.select(memory_relations)
        .where(
            memory_relations.c.scope == _p("scope"),
            sa.or_(memory_relations.c.source == fact, memory_relations.c.target == fact),
        )
        .order_by(memory_relations.c.created_at, *(memory_relations.c[n] for n in _KEY))
    )


def relation(row: Row, decode: TimeDecoder) -> MemoryRelation:
    source, kind, target, scope, created_at = row[:5]
    return MemoryRelation(scope, source, kind, target, decode(created_at))
