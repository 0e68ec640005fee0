"""How each write op becomes SQL: written once, run by both engines.

``apply_ops`` turns a ``write()`` call's ops into named statements (``statements.py``)
and runs them through an ``Executor``, the one seam between the op logic and an engine:
SQLite's executor runs compiled text on its ``sqlite3`` cursor in the writer thread,
PostgreSQL's runs the SQLAlchemy constructs on a ``Connection`` (inside ``run_sync``).
The caller owns the transaction; a raised error means the caller must roll it back.

Unknown rows are found by row counts, never by parsing driver errors: an ``UPDATE``
that matched nothing, an ``INSERT ... SELECT FROM conversations`` that selected
nothing, an ``ON CONFLICT DO NOTHING`` that did nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, assert_never

from ostinato.errors import NotFound, StoreError
from ostinato.ids import new_id
from ostinato.messages import JSON, Message, blocks_to_json
from ostinato.store.base import (
    STATE_AFTER,
    AppendMessage,
    CreateConversation,
    FinishToolCall,
    FinishTurn,
    SetConversationState,
    StartToolCall,
    StartTurn,
    WriteOp,
    utcnow,
)
from ostinato.store.sql.statements import WriteName

# How many times an append retries after losing a race for its ``seq``.
SEQ_ATTEMPTS = 8


class Executor(Protocol):
    """Runs named write statements inside the caller's open transaction."""

    def execute(self, name: WriteName, params: dict[str, Any]) -> int:
        """Run a statement; return how many rows it changed."""
        ...

    def returning(self, name: WriteName, params: dict[str, Any]) -> Any:
        """Run an ``INSERT ... RETURNING x``; return ``x`` of the row, or None if none."""
        ...

    def time(self, value: datetime) -> Any:
        """A timestamp as this engine binds it (naive values are taken as UTC)."""
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
    """Apply one op at time ``now``; returns the stored ``Message`` for an append."""
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
                raise NotFound(f"no conversation {turn.conversation_id!r}")
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
        case AppendMessage():
            return _append(ex, op, now)
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
