"""Long-term memory facts as SQL: remembering (closing the fact it supersedes, within
the scope's capacity), forgetting, relating two facts and resolving a conflict;
bitemporal, so nothing is deleted."""

from __future__ import annotations

from ostinato.errors import Conflict, InvalidRequest, NotFound, StoreError
from ostinato.ids import new_id
from ostinato.store.base import (
    ForgetFact,
    MemoryFact,
    MemoryFull,
    RememberFact,
    check_fact_text,
    normalize_subject,
)
from ostinato.store.relations import (
    MemoryRelation,
    RelateFacts,
    ResolveConflict,
    check_relation,
    missing_target,
)
from ostinato.store.sql import relation_sql, rows
from ostinato.store.sql.executor import Executor, WriteTime
from ostinato.store.sql.rows import Row


def _fact_row(ex: Executor, scope: str, memory_id: str) -> Row:
    """The stored row of fact ``memory_id`` of ``scope``; NotFound if there is none."""
    _require_storable_id(memory_id)
    found = ex.row("find_memory", {"b_id": memory_id})
    if found is None or found[2] != scope:
        raise NotFound(f"no memory {memory_id!r}")
    return found


def _close_fact(
    ex: Executor, scope: str, memory_id: str, now: WriteTime, superseded_by: str | None
) -> Row | None:
    """Close a current fact; its closed row, or None if no current fact matched."""
    _require_storable_id(memory_id)
    params = {
        "b_id": memory_id,
        "b_scope": scope,
        "valid_to": now.bound,
        "superseded_by": superseded_by,
    }
    return ex.row("close_memory", params)


def _require_storable_id(memory_id: str) -> None:
    """No fact has an id with a NUL in it (and PostgreSQL refuses NUL in any text)."""
    if "\x00" in memory_id:
        raise NotFound(f"no memory {memory_id!r}")


def remember(ex: Executor, op: RememberFact, now: WriteTime) -> MemoryFact:
    """Close the superseded fact (if any), check the capacity, insert the new fact."""
    text = check_fact_text(op.text)
    fact_id = op.id or new_id()
    ex.row("lock_memory_scope", {"scope": op.scope})
    if op.supersedes is not None and _close_fact(ex, op.scope, op.supersedes, now, fact_id) is None:
        _fact_row(ex, op.scope, op.supersedes)
        raise Conflict(f"memory {op.supersedes!r} is already closed")
    count = ex.returning("count_memories", {"scope": op.scope})
    if count >= op.capacity:
        raise MemoryFull(count, op.capacity)
    fact = MemoryFact(
        id=fact_id,
        scope=op.scope,
        text=text,
        valid_from=op.valid_from or op.recorded_at or now.value,
        recorded_at=op.recorded_at or now.value,
        subject=normalize_subject(op.subject),
        supersedes=op.supersedes,
        conversation_id=op.conversation_id,
        turn_id=op.turn_id,
    )
    params = {
        "id": fact.id,
        "scope": fact.scope,
        "text": fact.text,
        "subject": fact.subject,
        "valid_from": ex.time(fact.valid_from),
        "valid_to": None,
        "recorded_at": now.bound if op.recorded_at is None else ex.time(op.recorded_at),
        "supersedes": fact.supersedes,
        "superseded_by": None,
        "conversation_id": fact.conversation_id,
        "turn_id": fact.turn_id,
    }
    if op.id is not None and ex.row("find_memory", {"b_id": op.id}) is not None:
        raise StoreError(f"memory {op.id!r} exists")
    ex.execute("insert_memory", params)
    return fact


def forget(ex: Executor, op: ForgetFact, now: WriteTime) -> MemoryFact:
    """Close a current fact; a closed one is returned as it is."""
    closed = _close_fact(ex, op.scope, op.memory_id, now, None)
    if closed is None:
        closed = _fact_row(ex, op.scope, op.memory_id)
    return rows.memory(closed, ex.read_time)


def _current_fact(ex: Executor, scope: str, memory_id: str) -> Row:
    found = _fact_row(ex, scope, memory_id)
    if found[6] is not None:  # valid_to
        raise Conflict(f"memory {memory_id!r} is closed; use the fact that replaced it")
    return found


def relate(ex: Executor, op: RelateFacts, now: WriteTime) -> MemoryRelation:
    """Link two current facts of a scope; relating them again returns the first link."""
    kind = check_relation(op.source, op.relation, op.target)
    _current_fact(ex, op.scope, op.source)
    try:
        _current_fact(ex, op.scope, op.target)
    except NotFound:
        raise missing_target(op.target) from None
    key = {"source": op.source, "relation": kind, "target": op.target}
    ex.execute("insert_relation", {**key, "scope": op.scope, "created_at": now.bound})
    found = ex.row("find_relation", key)
    assert found is not None
    return relation_sql.relation(found, ex.read_time)


def resolve(ex: Executor, op: ResolveConflict, now: WriteTime) -> list[MemoryFact]:
    """Keep one fact, close the others that are still current (superseded by it)."""
    if op.keep in op.close:
        raise InvalidRequest("the fact to keep cannot also be one to close")
    ex.row("lock_memory_scope", {"scope": op.scope})
    _current_fact(ex, op.scope, op.keep)
    closed: list[MemoryFact] = []
    for memory_id in dict.fromkeys(op.close):
        row = _close_fact(ex, op.scope, memory_id, now, op.keep)
        if row is None:
            _fact_row(ex, op.scope, memory_id)  # NotFound, unless it was closed already
        else:
            closed.append(rows.memory(row, ex.read_time))
    return closed
