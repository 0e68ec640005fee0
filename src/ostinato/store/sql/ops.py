"""How each write op becomes SQL: written once, run by both engines.

``apply_ops`` turns a ``write()`` call's ops into named statements (``statements.py``)
and runs them through an ``Executor``, the one seam between the op logic and an engine:
SQLite's executor runs compiled text on its ``sqlite3`` cursor in the writer thread,
PostgreSQL's runs the SQLAlchemy constructs on a ``Connection`` (inside ``run_sync``).
The caller owns the transaction; a raised error means the caller must roll it back.

Unknown rows are found by row counts, never by parsing driver errors: an ``UPDATE``
that matched nothing, an ``INSERT ... SELECT FROM conversations`` that selected
nothing, an ``ON CONFLICT DO NOTHING`` that did nothing. Only then, on the way to an
error, does a lookup (``find_*``) tell the reasons apart (unknown row, taken id, an
approval already decided), so the errors match ``MemoryStore``'s and a write that
succeeds runs no extra statement.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeAlias, assert_never

from ostinato.approvals import Approval
from ostinato.errors import Conflict, NotFound, StoreError
from ostinato.ids import new_id
from ostinato.messages import JSON, Message, blocks_to_json
from ostinato.store.base import (
    STATE_AFTER,
    AppendMessage,
    AppendSummary,
    CreateApproval,
    CreateConversation,
    CreateGrant,
    DecideApproval,
    Enqueue,
    FinishToolCall,
    FinishTurn,
    ForgetFact,
    MemoryFact,
    MemoryFull,
    QueuedInput,
    RememberFact,
    RevokeGrant,
    SetConversationState,
    SetToolSwitch,
    StartToolCall,
    StartTurn,
    TakeQueued,
    WriteOp,
    check_fact_text,
    normalize_subject,
    utcnow,
)
from ostinato.store.sql import rows
from ostinato.store.sql.rows import Row
from ostinato.store.sql.statements import WriteName

# How many times an append retries after losing a race for its ``seq``.
SEQ_ATTEMPTS = 8


class Executor(Protocol):
    """Runs named statements (``WriteName``) inside the caller's open transaction."""

    def execute(self, name: WriteName, params: dict[str, Any]) -> int:
        """Run a statement; return how many rows it changed."""
        ...

    def returning(self, name: WriteName, params: dict[str, Any]) -> Any:
        """Run an ``INSERT ... RETURNING x``; return ``x`` of the row, or None if none."""
        ...

    def row(self, name: WriteName, params: dict[str, Any]) -> Row | None:
        """Run a statement that yields rows (``SELECT``, ``... RETURNING``); the first."""
        ...

    def time(self, value: datetime) -> Any:
        """A timestamp as this engine binds it (naive values are taken as UTC)."""
        ...

    def read_time(self, value: Any) -> datetime:
        """A stored timestamp back as an aware UTC datetime."""
        ...


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dump_json(value: JSON | list[JSON]) -> str:
    """The one JSON encoding of stored values (compact, UTF-8 kept as is)."""
    return _ENCODER.encode(value) if value else "{}" if isinstance(value, dict) else "[]"


@dataclass(frozen=True, slots=True)
class _Now:
    """The time of one ``write()`` call, as a datetime and as the engine binds it."""

    value: datetime
    bound: Any


def apply_ops(ex: Executor, ops: tuple[WriteOp, ...]) -> list[Any]:
    """Apply one ``write()`` call's ops in order; one result per op."""
    value = utcnow()
    now = _Now(value, ex.time(value))
    return [apply_op(ex, op, now) for op in ops]


def apply_op(ex: Executor, op: WriteOp, now: _Now) -> Any:
    """Apply one op at time ``now``; returns what the op produces (see ``WriteOp``)."""
    match op:
        case AppendMessage():
            return _append(ex, op, now)
        case AppendSummary():
            return _append_summary(ex, op, now)
        case RememberFact():
            return _remember(ex, op, now)
        case ForgetFact():
            return _forget(ex, op, now)
        case SetToolSwitch(scope=scope, tool=tool, enabled=enabled):
            params = {"scope": scope, "tool": tool, "enabled": enabled, "updated_at": now.bound}
            ex.execute("set_tool_switch", params)
            return None
        case (
            CreateConversation()
            | SetConversationState()
            | StartTurn()
            | FinishTurn()
            | StartToolCall()
            | FinishToolCall()
        ):
            _apply_history_op(ex, op, now)
            return None
        case (
            CreateApproval()
            | DecideApproval()
            | CreateGrant()
            | RevokeGrant()
            | Enqueue()
            | TakeQueued()
        ):
            return _apply_people_op(ex, op)
        case _:
            assert_never(op)


_HistoryOp: TypeAlias = (
    CreateConversation
    | SetConversationState
    | StartTurn
    | FinishTurn
    | StartToolCall
    | FinishToolCall
)
_PeopleOp: TypeAlias = (
    CreateApproval | DecideApproval | CreateGrant | RevokeGrant | Enqueue | TakeQueued
)


def _apply_history_op(ex: Executor, op: _HistoryOp, now: _Now) -> None:
    """Conversations, turns and tool calls (appends have ``_append``)."""
    match op:
        case CreateConversation(conversation=conv):
            params = {
                "id": conv.id,
                "owner": conv.owner,
                "state": conv.state,
                "persona": conv.persona,
                "title": conv.title,
                "metadata": dump_json(conv.metadata),
                "created_at": ex.time(conv.created_at),
                "updated_at": ex.time(conv.updated_at),
            }
            if not ex.execute("insert_conversation", params):
                raise StoreError(f"conversation {conv.id!r} exists")
        case SetConversationState(conversation_id=cid, state=state):
            _update_conversation(ex, cid, now, state)
        case StartTurn(turn=turn):
            params = {
                "id": turn.id,
                "conversation_id": turn.conversation_id,
                "run_id": turn.run_id,
                "kind": turn.kind,
                "status": turn.status,
                "stop_reason": turn.stop_reason,
                "started_at": ex.time(turn.started_at),
                "finished_at": ex.time(turn.finished_at) if turn.finished_at else None,
                "metrics": dump_json(turn.metrics),
                "error": turn.error,
            }
            if not ex.execute("insert_turn", params):
                _require_conversation(ex, turn.conversation_id)
                raise StoreError(f"turn {turn.id!r} exists")
        case FinishTurn():
            params = {
                "b_id": op.turn_id,
                "status": "finished",
                "stop_reason": op.stop_reason,
                "finished_at": ex.time(op.finished_at),
                "metrics": dump_json(op.metrics),
                "error": op.error,
            }
            if not ex.execute("finish_turn", params):
                raise NotFound(f"no turn {op.turn_id!r}")
            _update_conversation(ex, op.conversation_id, now, STATE_AFTER[op.stop_reason])
        case StartToolCall(record=rec):
            params = {
                "id": rec.id,
                "conversation_id": rec.conversation_id,
                "turn_id": rec.turn_id,
                "name": rec.name,
                "input": dump_json(rec.input),
                "status": rec.status,
                "result": rec.result,
                "is_error": rec.is_error,
                "started_at": ex.time(rec.started_at),
                "finished_at": ex.time(rec.finished_at) if rec.finished_at else None,
                "duration_s": rec.duration_s,
            }
            if not ex.execute("insert_tool_call", params):
                raise StoreError(f"tool call {rec.id!r} already recorded")
        case FinishToolCall():
            params = {
                "b_turn_id": op.turn_id,
                "b_id": op.tool_call_id,
                "status": op.status,
                "result": op.result,
                "is_error": op.is_error,
                "finished_at": ex.time(op.finished_at),
                "duration_s": op.duration_s,
            }
            if not ex.execute("finish_tool_call", params):
                raise NotFound(f"no tool call {op.tool_call_id!r}")
        case _:
            assert_never(op)


def _apply_people_op(ex: Executor, op: _PeopleOp) -> Any:
    """Approvals, grants and queued inputs: the decided ``Approval`` for a decision,
    the stored ``QueuedInput`` for an enqueue, else None."""
    match op:
        case CreateApproval(approval=approval):
            _create_approval(ex, approval)
        case DecideApproval():
            return _decide_approval(ex, op)
        case CreateGrant(grant=grant):
            params = {
                "id": grant.id,
                "owner": grant.owner,
                "conversation_id": grant.conversation_id,
                "tool": grant.tool,
                "scope": grant.scope,
                "key": grant.key,
                "created_at": ex.time(grant.created_at),
                "expires_at": ex.time(grant.expires_at) if grant.expires_at else None,
                "revoked_at": ex.time(grant.revoked_at) if grant.revoked_at else None,
                "approval_id": grant.approval_id,
                "metadata": dump_json(grant.metadata),
            }
            if not ex.execute("insert_grant", params):
                raise StoreError(f"grant {grant.id!r} exists")
        case RevokeGrant(grant_id=gid, revoked_at=when):
            if not ex.execute("revoke_grant", {"b_id": gid, "b_revoked_at": ex.time(when)}):
                raise NotFound(f"no grant {gid!r}")
        case Enqueue(item=item):
            return _enqueue(ex, item)
        case TakeQueued(item_id=iid, status=status):
            if not ex.execute("take_queued", {"b_id": iid, "b_status": "queued", "status": status}):
                found = ex.row("find_queued", {"b_id": iid})
                if found is None:
                    raise NotFound(f"no queued input {iid!r}")
                raise Conflict(f"queued input {iid!r} was already {found[0]}")
        case _:
            assert_never(op)
    return None


def _update_conversation(ex: Executor, cid: str, now: _Now, state: str | None = None) -> None:
    """Set ``updated_at`` (and ``state`` if given); NotFound if there is no such row.

    On PostgreSQL this also row-locks the conversation until commit, which serialises
    concurrent appenders to one conversation before they allocate a ``seq``.
    """
    params: dict[str, Any] = {"b_id": cid, "updated_at": now.bound}
    if state is None:
        changed = ex.execute("touch_conversation", params)
    else:
        params["state"] = state
        changed = ex.execute("set_state", params)
    if not changed:
        raise NotFound(f"no conversation {cid!r}")


def _append(ex: Executor, op: AppendMessage, now: _Now) -> Message:
    """Insert a message with the next ``seq`` of its conversation; retry a lost race."""
    _update_conversation(ex, op.conversation_id, now)
    message = op.message
    message_id = message.id or new_id()
    params = {
        "id": message_id,
        "conversation_id": op.conversation_id,
        "turn_id": op.turn_id,
        "role": message.role,
        "blocks": dump_json(blocks_to_json(message.blocks)),
        "hidden": message.hidden,
        "metadata": dump_json(message.metadata),
        "created_at": now.bound,
    }
    for _ in range(SEQ_ATTEMPTS):
        seq = ex.returning("insert_message", params)
        if seq is not None:
            return Message(
                role=message.role,
                blocks=message.blocks,
                hidden=message.hidden,
                metadata=message.metadata,
                seq=seq,
                id=message_id,
                turn_id=op.turn_id,
                created_at=now.value,
            )
    raise StoreError(f"could not allocate a seq in conversation {op.conversation_id!r}")


def _require_conversation(ex: Executor, cid: str) -> None:
    """NotFound unless conversation ``cid`` exists (a lookup for an error path)."""
    if ex.row("find_conversation", {"b_id": cid}) is None:
        raise NotFound(f"no conversation {cid!r}")


def _create_approval(ex: Executor, approval: Approval) -> None:
    params = {
        "id": approval.id,
        "conversation_id": approval.conversation_id,
        "turn_id": approval.turn_id,
        "tool_use_id": approval.tool_use_id,
        "tool": approval.tool,
        "arguments": dump_json(approval.arguments),
        "arguments_hash": approval.arguments_hash,
        "risk": approval.risk,
        "family": approval.family,
        "status": approval.status,
        "ending": None if approval.ending is None else str(approval.ending),
        "requested_at": ex.time(approval.requested_at),
        "decided_at": ex.time(approval.decided_at) if approval.decided_at else None,
        "decided_by": approval.decided_by,
        "remember": approval.remember,
    }
    if not ex.execute("insert_approval", params):
        _require_conversation(ex, approval.conversation_id)
        raise StoreError(f"approval {approval.id!r} exists")


def _decide_approval(ex: Executor, op: DecideApproval) -> Approval:
    """Decide a pending approval; the decided row as stored.

    The ``UPDATE`` matches only a pending row, so of two deciders racing the second
    matches nothing: on PostgreSQL it waits for the first's row lock, then re-reads the
    row (READ COMMITTED) and finds it decided.
    """
    params = {
        "b_id": op.approval_id,
        "b_status": "pending",
        "status": "decided",
        "ending": str(op.ending),
        "decided_at": ex.time(op.decided_at),
        "decided_by": op.decided_by,
        "remember": op.remember,
    }
    decided = ex.row("decide_approval", params)
    if decided is not None:
        return rows.approval(decided, ex.read_time)
    found = ex.row("find_approval", {"b_id": op.approval_id})
    if found is None:
        raise NotFound(f"no approval {op.approval_id!r}")
    raise Conflict(f"approval {op.approval_id!r} was already decided ({found[1]})")


def _enqueue(ex: Executor, item: QueuedInput) -> QueuedInput:
    """Store a queued input; it comes back with the position the store gave it."""
    message = item.message
    params = {
        "id": item.id,
        "conversation_id": item.conversation_id,
        "role": message.role,
        "blocks": dump_json(blocks_to_json(message.blocks)),
        "hidden": message.hidden,
        "metadata": dump_json(message.metadata),
        "client_message_id": item.client_message_id,
        "status": "queued",
        "created_at": ex.time(item.created_at),
    }
    position = ex.returning("insert_queued", params)
    if position is None:
        _require_conversation(ex, item.conversation_id)
        raise StoreError(f"queued input {item.id!r} exists")
    return dataclasses.replace(item, position=position, status="queued")


def _append_summary(ex: Executor, op: AppendSummary, now: _Now) -> Message:
    """Append the summary row through the one insert path, then record the watermark."""
    stored = _append(ex, AppendMessage(op.conversation_id, op.message, op.turn_id), now)
    params = {
        "conversation_id": op.conversation_id,
        "message_seq": stored.seq,
        "message_id": stored.id,
        "through_seq": op.through_seq,
        "created_at": now.bound,
    }
    ex.execute("insert_summary", params)
    return stored


def _fact_row(ex: Executor, scope: str, memory_id: str) -> Row:
    """The stored row of fact ``memory_id`` of ``scope``; NotFound if there is none."""
    _require_storable_id(memory_id)
    found = ex.row("find_memory", {"b_id": memory_id})
    if found is None or found[2] != scope:
        raise NotFound(f"no memory {memory_id!r}")
    return found


def _close_fact(
    ex: Executor, scope: str, memory_id: str, now: _Now, superseded_by: str | None
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


def _remember(ex: Executor, op: RememberFact, now: _Now) -> MemoryFact:
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
        valid_from=op.valid_from or now.value,
        recorded_at=now.value,
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
        "recorded_at": now.bound,
        "supersedes": fact.supersedes,
        "superseded_by": None,
        "conversation_id": fact.conversation_id,
        "turn_id": fact.turn_id,
    }
    if op.id is not None and ex.row("find_memory", {"b_id": op.id}) is not None:
        raise StoreError(f"memory {op.id!r} exists")
    ex.execute("insert_memory", params)
    return fact


def _forget(ex: Executor, op: ForgetFact, now: _Now) -> MemoryFact:
    """Close a current fact; a closed one is returned as it is."""
    closed = _close_fact(ex, op.scope, op.memory_id, now, None)
    if closed is None:
        closed = _fact_row(ex, op.scope, op.memory_id)
    return rows.memory(closed, ex.read_time)
