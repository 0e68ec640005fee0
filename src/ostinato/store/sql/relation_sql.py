"""Memory facts as a graph in SQL, for both engines: the write statements of the relation
ops (run by name through the ``Executor``; the ops are in ``fact_ops``), the reads
(relations of a fact, facts in conflict) and decoding a relation row."""

from __future__ import annotations

from functools import cache
from typing import Any, Literal, TypeAlias

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ostinato.store.relations import MemoryRelation
from ostinato.store.sql.rows import Row, TimeDecoder
from ostinato.store.sql.tables import memories, memory_relations

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


@cache
def memory_conflicts() -> sa.Select[Any]:
    """Current facts whose subject has more than one distinct current text."""
    scope = sa.bindparam("scope", type_=memories.c.scope.type)
    current = sa.and_(memories.c.scope == scope, memories.c.valid_to.is_(None))
    clashing = (
        sa.select(memories.c.subject)
        .where(current, memories.c.subject.is_not(None))
        .group_by(memories.c.subject)
        .having(sa.func.count(sa.distinct(memories.c.text)) > 1)
    )
    return (
        sa.select(memories)
        .where(current, memories.c.subject.in_(clashing))
        .order_by(memories.c.subject, memories.c.recorded_at, memories.c.id)
    )


def relation(row: Row, decode: TimeDecoder) -> MemoryRelation:
    source, kind, target, scope, created_at = row[:5]
    return MemoryRelation(scope, source, kind, target, decode(created_at))
