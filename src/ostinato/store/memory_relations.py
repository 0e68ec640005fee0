"""The in-memory store's relations between facts: its writes (``RELATION_WRITES``,
dispatched by ``memory_writes``) and its read."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ostinato.errors import Conflict, InvalidRequest, NotFound
from ostinato.store.base import MemoryFact, utcnow
from ostinato.store.relations import (
    MemoryRelation,
    RelateFacts,
    ResolveConflict,
    check_relation,
    missing_target,
)

if TYPE_CHECKING:
    from ostinato.store.memory_tables import MemoryTables

Undo = list[Callable[[], None]]


def _current(t: MemoryTables, scope: str, memory_id: str) -> MemoryFact:
    fact = t._memories.get(memory_id)
    if fact is None or fact.scope != scope:
        raise NotFound(f"no memory {memory_id!r}")
    if not fact.current:
        raise Conflict(f"memory {memory_id!r} is closed; use the fact that replaced it")
    return fact


def _relate(t: MemoryTables, op: RelateFacts, undo: Undo) -> MemoryRelation:
    relation = check_relation(op.source, op.relation, op.target)
    _current(t, op.scope, op.source)
    try:
        _current(t, op.scope, op.target)
    except NotFound:
        raise missing_target(op.target) from None
    key = (op.source, relation, op.target)
    found = t._relations.get(key)
    if found is not None:
        return found
    made = MemoryRelation(op.scope, op.source, relation, op.target, utcnow())
    t._relations[key] = made
    undo.append(lambda: t._relations.__delitem__(key))
    return made


def _resolve(t: MemoryTables, op: ResolveConflict, undo: Undo) -> list[MemoryFact]:
    if op.keep in op.close:
        raise InvalidRequest("the fact to keep cannot also be one to close")
    _current(t, op.scope, op.keep)
    now = utcnow()
    closed: list[MemoryFact] = []
    for memory_id in dict.fromkeys(op.close):
        fact = t._memories.get(memory_id)
        if fact is None or fact.scope != op.scope:
            raise NotFound(f"no memory {memory_id!r}")
        if fact.current:
            undo.append(functools.partial(t._memories.__setitem__, memory_id, fact))
            fact = dataclasses.replace(fact, valid_to=now, superseded_by=op.keep)
            t._memories[memory_id] = fact
            closed.append(fact)
    return closed


RELATION_WRITES: dict[type, Callable[[Any, Any, Undo], Any]] = {
    RelateFacts: _relate,
    ResolveConflict: _resolve,
}


def relations_of(t: MemoryTables, scope: str, memory_id: str) -> list[MemoryRelation]:
    return sorted(
        (
            r
            for r in t._relations.values()
            if r.scope == scope and memory_id in (r.source, r.target)
        ),
        key=lambda r: r.created_at,
    )
