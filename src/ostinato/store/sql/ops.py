"""How each write op becomes SQL: written once, run by both engines.

``apply_ops`` turns a ``write()`` call's ops into named statements (``statements.py``),
one function per op dispatched from one table (``OPS``; memory facts are in
``fact_ops``), and runs them through an ``Executor`` (``executor.py``), the one seam
between the op logic and an engine:
SQLite's executor runs compiled text on its ``sqlite3`` cursor in the writer thread,
PostgreSQL's runs their compiled text on asyncpg inside a transaction (``pg_tx``).
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
from collections.abc import Callable
from typing import Any

from ostinato.approvals import Approval
from ostinato.errors import Conflict, NotFound, StoreError
from ostinato.ids import new_id
from ostinato.messages import Message, blocks_to_json
from ostinato.store.accounts import ACCOUNT_OPS
from ostinato.store.answered import answer_keys, refusal
from ostinato.store.base import (
    STATE_AFTER,
    AppendMessage,
    AppendSummary,
    ClaimTurn,
    CreateApproval,
    CreateConversation,
    CreateGrant,
    DecideApproval,
    EditQueued,
    Enqueue,
    FinishToolCall,
    FinishTurn,
    ForgetFact,
    QueuedInput,
    RememberFact,
    RevokeGrant,
    SetConversationState,
    SetMessageMetadata,
    SetToolSwitch,
    SetTurnMetrics,
    StartToolCall,
    StartTurn,
    TakeQueued,
    WriteOp,
    utcnow,
)
from ostinato.store.branches import MoveBranch
from ostinato.store.erasure import DeleteConversation, EraseOwner
from ostinato.store.forged import FORGED_OPS
from ostinato.store.jobs import JOB_OPS
from ostinato.store.mcp_servers import MCP_SERVER_OPS
from ostinato.store.relations import RelateFacts, ResolveConflict
from ostinato.store.spend import CloseTab, SettleSpend, TabSpend
from ostinato.store.sql import rows
from ostinato.store.sql.account_sql import apply_account_op
from ostinato.store.sql.erasure_sql import delete_conversation, erase_owner
from ostinato.store.sql.executor import Executor, WriteTime, derive, dump_json
from ostinato.store.sql.fact_ops import forget, relate, remember, resolve
from ostinato.store.sql.forged_sql import apply_forged_op
from ostinato.store.sql.job_sql import apply_job_op
from ostinato.store.sql.mcp_sql import apply_mcp_op
from ostinato.store.sql.search_sql import index_message, index_title
from ostinato.store.sql.spend_sql import close_op, settle_op, tab_op
from ostinato.store.sql.tree_sql import move_branch

# How many times an append retries after losing a race for its ``seq``.
SEQ_ATTEMPTS = 8


def apply_ops(ex: Executor, ops: tuple[WriteOp, ...]) -> list[Any]:
    """Apply one ``write()`` call's ops in order; one result per op."""
    value = utcnow()
    now = WriteTime(value, ex.time(value))
    results: list[Any] = []
    for op in ops:  # a loop, not a comprehension: a write is one or two ops
        results.append(OPS[type(op)](ex, op, now))
    return results


def apply_op(ex: Executor, op: WriteOp, now: WriteTime) -> Any:
    """Apply one op at time ``now``; returns what the op produces (see ``WriteOp``)."""
    return OPS[type(op)](ex, op, now)


# --- conversations, turns, tool calls (appends have ``_append``) -------------------------


def _create_conversation(ex: Executor, op: CreateConversation, now: WriteTime) -> None:
    conv = op.conversation
    params = {
        "id": conv.id,
        "owner": conv.owner,
        "state": conv.state,
        "persona": conv.persona,
        "title": conv.title,
        "metadata": dump_json(conv.metadata),
        "created_at": ex.time(conv.created_at),
        "updated_at": ex.time(conv.updated_at),
        "pinned": conv.pinned,
        "archived_at": ex.time(conv.archived_at) if conv.archived_at else None,
        **conv.branch.columns(),
    }
    if not ex.execute("insert_conversation", params):
        raise StoreError(f"conversation {conv.id!r} exists")
    index_title(ex, conv.id, conv.owner, conv.title)
    for agent, number in op.pins:
        ex.execute("pin_version", {"conversation_id": conv.id, "agent": agent, "version": number})


def _set_conversation_state(ex: Executor, op: SetConversationState, now: WriteTime) -> None:
    _update_conversation(ex, op.conversation_id, now, op.state)


def _start_turn(ex: Executor, op: StartTurn, now: WriteTime) -> None:
    turn = op.turn
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
        "timeline": _opt_json(turn.timeline),
        "holder": turn.holder,
    }
    if not ex.execute("insert_turn", params):
        _require_conversation(ex, turn.conversation_id)
        raise StoreError(f"turn {turn.id!r} exists")


def _claim_turn(ex: Executor, op: ClaimTurn, now: WriteTime) -> None:
    params = {"b_id": op.turn_id, "b_holder": op.holder_was, "holder": op.holder}
    if not ex.execute("claim_turn", params):
        raise Conflict(f"turn {op.turn_id!r} is no longer held by {op.holder_was!r}")


def _finish_turn(ex: Executor, op: FinishTurn, now: WriteTime) -> None:
    params = {
        "b_id": op.turn_id,
        "status": "finished",
        "stop_reason": op.stop_reason,
        "finished_at": ex.time(op.finished_at),
        "metrics": dump_json(op.metrics),
        "error": op.error,
        "timeline": _opt_json(op.timeline),
    }
    if not ex.execute("finish_turn", params):
        raise NotFound(f"no turn {op.turn_id!r}")
    _update_conversation(ex, op.conversation_id, now, STATE_AFTER[op.stop_reason])


def _set_turn_metrics(ex: Executor, op: SetTurnMetrics, now: WriteTime) -> None:
    params = {
        "b_id": op.turn_id,
        "metrics": dump_json(op.metrics),
        "timeline": _opt_json(op.timeline),
    }
    if not ex.execute("set_turn_metrics", params):
        raise NotFound(f"no turn {op.turn_id!r}")


def _set_message_metadata(ex: Executor, op: SetMessageMetadata, now: WriteTime) -> None:
    params = {
        "b_conversation_id": op.conversation_id,
        "b_seq": op.seq,
        "metadata": dump_json(op.metadata),
    }
    if not ex.execute("set_message_metadata", params):
        raise NotFound(f"no message {op.seq} in conversation {op.conversation_id!r}")


def _opt_json(value: Any) -> str | None:
    return None if value is None else dump_json(value)


def _start_tool_call(ex: Executor, op: StartToolCall, now: WriteTime) -> None:
    rec = op.record
    params = {
        "id": rec.id,
        "conversation_id": rec.conversation_id,
        "turn_id": rec.turn_id,
        "name": rec.name,
        "input": dump_json(rec.input),
        "status": rec.status,
        "result": _no_nul(rec.result),
        "is_error": rec.is_error,
        "started_at": ex.time(rec.started_at),
        "finished_at": ex.time(rec.finished_at) if rec.finished_at else None,
        "duration_s": rec.duration_s,
    }
    if not ex.execute("insert_tool_call", params):
        raise StoreError(f"tool call {rec.id!r} already recorded")


def _finish_tool_call(ex: Executor, op: FinishToolCall, now: WriteTime) -> None:
    params = {
        "b_turn_id": op.turn_id,
        "b_id": op.tool_call_id,
        "status": op.status,
        "result": _no_nul(op.result),
        "is_error": op.is_error,
        "finished_at": ex.time(op.finished_at),
        "duration_s": op.duration_s,
    }
    if not ex.execute("finish_tool_call", params):
        raise NotFound(f"no tool call {op.tool_call_id!r}")


def _no_nul(text: str | None) -> str | None:
    """A tool's result as a text column holds it: PostgreSQL text cannot hold NUL, so it
    becomes U+FFFD (the tool row's JSON keeps the exact text)."""
    return text.replace("\x00", "\ufffd") if text and "\x00" in text else text


def _set_tool_switch(ex: Executor, op: SetToolSwitch, now: WriteTime) -> None:
    params = {"scope": op.scope, "tool": op.tool, "enabled": op.enabled, "updated_at": now.bound}
    ex.execute("set_tool_switch", params)


# --- approvals, grants, queued inputs -----------------------------------------------------


def _create_grant(ex: Executor, op: CreateGrant, now: WriteTime) -> None:
    grant = op.grant
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


def _revoke_grant(ex: Executor, op: RevokeGrant, now: WriteTime) -> None:
    if not ex.execute(
        "revoke_grant", {"b_id": op.grant_id, "b_revoked_at": ex.time(op.revoked_at)}
    ):
        raise NotFound(f"no grant {op.grant_id!r}")


def _edit_queued(ex: Executor, op: EditQueued, now: WriteTime) -> None:
    iid, message, cid = op.item_id, op.message, op.conversation_id
    where = {"b_id": iid, "b_conversation_id": cid, "b_status": "queued"}
    if message is None:
        changed = ex.execute("drop_queued", {**where, "status": "dropped"})
    else:
        blocks = dump_json(blocks_to_json(message.blocks))
        params = {**where, "blocks": blocks, "metadata": dump_json(message.metadata)}
        changed = ex.execute("edit_queued", params)
    if not changed:
        found = ex.row("find_queued_in", {"b_id": iid, "b_conversation_id": cid})
        if found is None:
            raise NotFound(f"no queued input {iid!r}")
        raise Conflict(f"queued input {iid!r} was already {found[0]}")


def _take_queued(ex: Executor, op: TakeQueued, now: WriteTime) -> None:
    iid = op.item_id
    if not ex.execute("take_queued", {"b_id": iid, "b_status": "queued", "status": op.status}):
        found = ex.row("find_queued", {"b_id": iid})
        if found is None:
            raise NotFound(f"no queued input {iid!r}")
        raise Conflict(f"queued input {iid!r} was already {found[0]}")


def _update_conversation(ex: Executor, cid: str, now: WriteTime, state: str) -> None:
    """Set ``state`` and ``updated_at``; NotFound if there is no such row."""
    params = {"b_id": cid, "updated_at": now.bound, "state": state}
    if not ex.execute("set_state", params):
        raise NotFound(f"no conversation {cid!r}")


def _append(ex: Executor, op: AppendMessage, now: WriteTime) -> Message:
    """Insert a message with the next ``seq`` of its conversation; retry a lost race.

    The conversation row is not touched (its ``updated_at`` is read as the newer of the
    stored one and the last message's time, ``conversation_sql.conversation_columns``): where
    appenders must take turns (``Executor.serialise_appends``) it is locked instead.
    """
    cid = op.conversation_id
    if ex.serialise_appends and ex.row("lock_conversation", {"b_id": cid}) is None:
        raise NotFound(f"no conversation {cid!r}")
    message = op.message
    message_id = message.id or new_id()
    params = {
        "id": message_id,
        "conversation_id": cid,
        "turn_id": op.turn_id,
        "role": message.role,
        "blocks": dump_json(blocks_to_json(message.blocks)),
        "hidden": message.hidden,
        "metadata": dump_json(message.metadata),
        "created_at": now.bound if op.at is None else ex.time(op.at),
    }
    for _ in range(SEQ_ATTEMPTS):
        position = ex.returning("insert_message", params)
        if position is not None:
            _answer(ex, op, message_id)
            index_message(ex, cid, message_id, message)
            if type(position) is int:  # ``seq_of`` and ``parent_of``, without the calls
                seq, parent = position >> 32, position & 0xFFFFFFFF
            else:  # still to come (a planned statement): picked when it comes
                seq, parent = derive(position, seq_of), derive(position, parent_of)
            return Message(
                role=message.role,
                blocks=message.blocks,
                hidden=message.hidden,
                metadata=message.metadata,
                seq=seq,
                id=message_id,
                turn_id=op.turn_id,
                created_at=now.value if op.at is None else op.at,
                parent_seq=parent,
            )
        _require_conversation(ex, cid)  # none inserted: an unknown conversation, or a race
    raise StoreError(f"could not allocate a seq in conversation {cid!r}")


def _answer(ex: Executor, op: AppendMessage, message_id: str) -> None:
    """Record each call the row answers (``store.answered``): ``AlreadyAnswered`` for
    those that had a result already."""
    taken = []
    for turn_id, tool_use_id in answer_keys(op):
        params = {
            "conversation_id": op.conversation_id,
            "turn_id": turn_id,
            "tool_use_id": tool_use_id,
            "message_id": message_id,
        }
        if not ex.execute("insert_tool_result", params):
            taken.append(tool_use_id)
    if taken:
        raise refusal(taken)


def seq_of(position: int) -> int:
    """The seq in what an insert of a message returns (``statements._position``)."""
    return position >> 32


def parent_of(position: int) -> int:
    """The parent's seq in what an insert of a message returns."""
    return position & 0xFFFFFFFF


def _require_conversation(ex: Executor, cid: str) -> None:
    """NotFound unless conversation ``cid`` exists (a lookup for an error path)."""
    if ex.row("find_conversation", {"b_id": cid}) is None:
        raise NotFound(f"no conversation {cid!r}")


def _create_approval(ex: Executor, op: CreateApproval, now: WriteTime) -> None:
    approval = op.approval
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


def _decide_approval(ex: Executor, op: DecideApproval, now: WriteTime) -> Approval:
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


def _enqueue(ex: Executor, op: Enqueue, now: WriteTime) -> QueuedInput:
    """Store a queued input; it comes back with the position the store gave it."""
    item = op.item
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
        "holder": item.holder,
    }
    position = ex.returning("insert_queued", params)
    if position is None:
        _require_conversation(ex, item.conversation_id)
        raise StoreError(f"queued input {item.id!r} exists")
    return dataclasses.replace(item, position=position, status="queued")


def _append_summary(ex: Executor, op: AppendSummary, now: WriteTime) -> Message:
    """Append the summary row through the one insert path, then record the watermark."""
    append = AppendMessage(op.conversation_id, op.message, op.turn_id, at=op.at)
    stored = _append(ex, append, now)
    params = {
        "conversation_id": op.conversation_id,
        "message_seq": stored.seq,
        "message_id": stored.id,
        "through_seq": op.through_seq,
        "created_at": now.bound,
    }
    ex.execute("insert_summary", params)
    return stored


WriteFunction = Callable[[Executor, Any, WriteTime], Any]

OPS: dict[type, WriteFunction] = {
    CreateConversation: _create_conversation,
    SetConversationState: _set_conversation_state,
    StartTurn: _start_turn,
    ClaimTurn: _claim_turn,
    FinishTurn: _finish_turn,
    SetTurnMetrics: _set_turn_metrics,
    AppendMessage: _append,
    AppendSummary: _append_summary,
    SetMessageMetadata: _set_message_metadata,
    StartToolCall: _start_tool_call,
    FinishToolCall: _finish_tool_call,
    CreateApproval: _create_approval,
    DecideApproval: _decide_approval,
    CreateGrant: _create_grant,
    RevokeGrant: _revoke_grant,
    Enqueue: _enqueue,
    TakeQueued: _take_queued,
    EditQueued: _edit_queued,
    RememberFact: remember,
    ForgetFact: forget,
    SetToolSwitch: _set_tool_switch,
    DeleteConversation: delete_conversation,
    EraseOwner: erase_owner,
    **dict.fromkeys(ACCOUNT_OPS, lambda ex, op, now: apply_account_op(ex, op, now.value)),
    RelateFacts: relate,
    ResolveConflict: resolve,
    **dict.fromkeys(FORGED_OPS, lambda ex, op, now: apply_forged_op(ex, op, now.value)),
    **dict.fromkeys(MCP_SERVER_OPS, lambda ex, op, now: apply_mcp_op(ex, op, now.value)),
    **dict.fromkeys(JOB_OPS, lambda ex, op, now: apply_job_op(ex, op)),
    MoveBranch: move_branch,
    SettleSpend: lambda ex, op, now: settle_op(ex, op),
    TabSpend: tab_op,  # once a model call: called directly
    CloseTab: lambda ex, op, now: close_op(ex, op),
}
"""One function per write op; ``tests/store`` checks every ``WriteOp`` has one."""
