"""The in-memory store's writes: one small function per write op, dispatched from one
table (``WRITES``), as ``sql/ops.py`` does for the SQL stores.

Every function takes the store's tables, the op and the write's undo list. It checks
before it changes anything and records how to undo each change, so ``apply`` can commit
all of a write's ops or none: if an op raises, the undo steps run in reverse.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ostinato.approvals import Approval
from ostinato.errors import Conflict, NotFound, StoreError
from ostinato.ids import new_id
from ostinato.messages import Message
from ostinato.store.answered import answer_keys, refusal
from ostinato.store.base import (
    STATE_AFTER,
    AppendMessage,
    AppendSummary,
    ClaimTurn,
    Conversation,
    ConversationState,
    CreateApproval,
    CreateConversation,
    CreateGrant,
    DecideApproval,
    EditQueued,
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
    SetMessageMetadata,
    SetToolSwitch,
    SetTurnMetrics,
    StartToolCall,
    StartTurn,
    TakeQueued,
    ToolCallRecord,
    Turn,
    WriteOp,
    check_fact_text,
    normalize_subject,
    utcnow,
)
from ostinato.store.erasure import DeleteConversation, EraseOwner
from ostinato.store.memory_accounts import ACCOUNT_WRITES
from ostinato.store.memory_erasure import delete_conversation, erase_owner
from ostinato.store.memory_forged import FORGED_WRITES
from ostinato.store.memory_jobs import JOB_WRITES
from ostinato.store.memory_mcp import MCP_SERVER_WRITES
from ostinato.store.memory_relations import RELATION_WRITES
from ostinato.store.memory_tables import MemoryTables as MemoryTables
from ostinato.store.memory_tree import TREE_WRITES, parent_for
from ostinato.store.spend import (
    CloseTab,
    SettleSpend,
    TabSpend,
    close_write,
    settle_write,
    tab_write,
)

Undo = list[Callable[[], None]]


def apply(tables: MemoryTables, ops: tuple[WriteOp, ...]) -> list[Any]:
    """Apply one ``write()`` call's ops in order, all or none; one result per op."""
    undo: Undo = []
    results: list[Any] = []
    try:
        for op in ops:  # a loop, not a comprehension: a write is one or two ops
            results.append(WRITES[type(op)](tables, op, undo))
        return results
    except BaseException:
        for step in reversed(undo):
            step()
        raise


def _restore(table: dict[Any, Any], key: Any, undo: Undo) -> None:
    """Record how to put ``table[key]`` back as it is now."""
    if key in table:
        old = table[key]
        undo.append(lambda: table.__setitem__(key, old))
    else:
        undo.append(lambda: table.pop(key, None))


def conversation_of(t: MemoryTables, cid: str) -> Conversation:
    found = t._conversations.get(cid)
    if found is None:
        raise NotFound(f"no conversation {cid!r}")
    return found


# --- conversations, turns, messages, tool calls ----------------------------------------


def _create_conversation(t: MemoryTables, op: CreateConversation, undo: Undo) -> None:
    conv = op.conversation
    if conv.id in t._conversations:
        raise StoreError(f"conversation {conv.id!r} exists")
    _restore(t._conversations, conv.id, undo)
    _restore(t._messages, conv.id, undo)
    t._conversations[conv.id] = conv
    t._messages[conv.id] = []
    if op.pins:
        _restore(t._pins, conv.id, undo)
        t._pins[conv.id] = dict(op.pins)


def _set_state(t: MemoryTables, cid: str, state: ConversationState, undo: Undo) -> None:
    c = conversation_of(t, cid)
    _restore(t._conversations, cid, undo)
    _restore(t._updated, cid, undo)
    # a hot path: built by hand rather than by dataclasses.replace
    t._conversations[cid] = Conversation(
        c.id,
        state,
        c.created_at,
        c.updated_at,
        c.owner,
        c.persona,
        c.title,
        c.metadata,
        c.pinned,
        c.archived_at,
        c.branch,
    )
    t._updated[cid] = utcnow()


def _set_conversation_state(t: MemoryTables, op: SetConversationState, undo: Undo) -> None:
    _set_state(t, op.conversation_id, op.state, undo)


def _start_turn(t: MemoryTables, op: StartTurn, undo: Undo) -> None:
    turn = op.turn
    conversation_of(t, turn.conversation_id)
    if turn.id in t._turns:
        raise StoreError(f"turn {turn.id!r} exists")
    _restore(t._turns, turn.id, undo)
    t._turns[turn.id] = turn


def _claim_turn(t: MemoryTables, op: ClaimTurn, undo: Undo) -> None:
    turn = t._turns.get(op.turn_id)
    if turn is None or turn.holder != op.holder_was:
        raise Conflict(f"turn {op.turn_id!r} is no longer held by {op.holder_was!r}")
    _restore(t._turns, op.turn_id, undo)
    t._turns[op.turn_id] = dataclasses.replace(turn, holder=op.holder)


def _finish_turn(t: MemoryTables, op: FinishTurn, undo: Undo) -> None:
    turn = t._turns.get(op.turn_id)
    if turn is None:
        raise NotFound(f"no turn {op.turn_id!r}")
    conversation_of(t, op.conversation_id)
    _restore(t._turns, op.turn_id, undo)
    t._turns[op.turn_id] = Turn(
        turn.id,
        turn.conversation_id,
        turn.run_id,
        "finished",
        turn.started_at,
        turn.kind,
        op.stop_reason,
        op.finished_at,
        op.metrics,
        op.error,
        op.timeline,
        turn.holder,
    )
    _set_state(t, op.conversation_id, STATE_AFTER[op.stop_reason], undo)


def _set_turn_metrics(t: MemoryTables, op: SetTurnMetrics, undo: Undo) -> None:
    turn = t._turns.get(op.turn_id)
    if turn is None:
        raise NotFound(f"no turn {op.turn_id!r}")
    _restore(t._turns, op.turn_id, undo)
    t._turns[op.turn_id] = dataclasses.replace(turn, metrics=op.metrics, timeline=op.timeline)


def _append(t: MemoryTables, op: AppendMessage, undo: Undo) -> Message:
    conversation = conversation_of(t, op.conversation_id)
    rows = t._messages[op.conversation_id]
    if op.message.tool_results:  # one result per call (``store.answered``)
        keys = [(op.conversation_id, *key) for key in answer_keys(op)]
        taken = [key[2] for i, key in enumerate(keys) if key in t._answered or key in keys[:i]]
        if taken:
            raise refusal(taken)
        t._answered.update(keys)
        undo.append(lambda: t._answered.difference_update(keys))
    message, now = op.message, op.at or utcnow()
    stored = Message(
        message.role,
        message.blocks,
        message.hidden,
        message.metadata,
        (rows[-1].seq or 0) + 1 if rows else 1,
        message.id or new_id(),
        op.turn_id,
        now,
        parent_for(conversation.branch, rows),
    )
    rows.append(stored)
    undo.append(lambda: rows.remove(stored))  # updated_at is read from the last row
    return stored


def _append_summary(t: MemoryTables, op: AppendSummary, undo: Undo) -> Message:
    cid = op.conversation_id
    row = _append(t, AppendMessage(cid, op.message, op.turn_id, at=op.at), undo)
    made = t._summaries.setdefault(cid, [])
    made.append((row, op.through_seq))
    undo.append(lambda: made.remove((row, op.through_seq)))
    return row


def _set_message_metadata(t: MemoryTables, op: SetMessageMetadata, undo: Undo) -> None:
    rows = t._messages.get(op.conversation_id, [])
    index = next((i for i, row in enumerate(rows) if row.seq == op.seq), None)
    if index is not None:
        old = rows[index]
        rows[index] = dataclasses.replace(old, metadata=dict(op.metadata))
        undo.append(lambda: rows.__setitem__(index, old))
        return
    raise NotFound(f"no message {op.seq} in conversation {op.conversation_id!r}")


def _start_tool_call(t: MemoryTables, op: StartToolCall, undo: Undo) -> None:
    record = op.record
    key = (record.turn_id, record.id)
    calls = t._tool_calls
    if key in calls:
        raise StoreError(f"tool call {record.id!r} already recorded")

    def forget() -> None:  # (``_restore`` of a key not there, written out)
        calls.pop(key, None)

    undo.append(forget)
    calls[key] = record


def _finish_tool_call(t: MemoryTables, op: FinishToolCall, undo: Undo) -> None:
    key = (op.turn_id, op.tool_call_id)
    calls = t._tool_calls
    started = calls.get(key)
    if started is None:
        raise NotFound(f"no tool call {op.tool_call_id!r}")
    undo.append(lambda: calls.__setitem__(key, started))  # (``_restore``, written out)
    calls[key] = ToolCallRecord(
        started.id,
        started.conversation_id,
        started.turn_id,
        started.name,
        started.input,
        op.status,
        started.started_at,
        op.finished_at,
        op.duration_s,
        op.result,
        op.is_error,
    )


# --- approvals, grants, queued inputs, tool switches ------------------------------------


def _create_approval(t: MemoryTables, op: CreateApproval, undo: Undo) -> None:
    approval = op.approval
    conversation_of(t, approval.conversation_id)
    if approval.id in t._approvals:
        raise StoreError(f"approval {approval.id!r} exists")
    _restore(t._approvals, approval.id, undo)
    t._approvals[approval.id] = approval


def _decide_approval(t: MemoryTables, op: DecideApproval, undo: Undo) -> Approval:
    approval = t._approvals.get(op.approval_id)
    if approval is None:
        raise NotFound(f"no approval {op.approval_id!r}")
    if approval.status != "pending":
        raise Conflict(f"approval {op.approval_id!r} was already decided ({approval.ending})")
    decided = dataclasses.replace(
        approval,
        status="decided",
        ending=op.ending,
        decided_at=op.decided_at,
        decided_by=op.decided_by,
        remember=op.remember,
    )
    _restore(t._approvals, op.approval_id, undo)
    t._approvals[op.approval_id] = decided
    return decided


def _create_grant(t: MemoryTables, op: CreateGrant, undo: Undo) -> None:
    grant = op.grant
    if grant.id in t._grants:
        raise StoreError(f"grant {grant.id!r} exists")
    _restore(t._grants, grant.id, undo)
    t._grants[grant.id] = grant


def _revoke_grant(t: MemoryTables, op: RevokeGrant, undo: Undo) -> None:
    found = t._grants.get(op.grant_id)
    if found is None:
        raise NotFound(f"no grant {op.grant_id!r}")
    if found.revoked_at is None:
        _restore(t._grants, op.grant_id, undo)
        t._grants[op.grant_id] = dataclasses.replace(found, revoked_at=op.revoked_at)


def _enqueue(t: MemoryTables, op: Enqueue, undo: Undo) -> QueuedInput:
    item = op.item
    conversation_of(t, item.conversation_id)
    if item.id in t._queue:
        raise StoreError(f"queued input {item.id!r} exists")
    stored = dataclasses.replace(item, position=next(t._positions), status="queued")
    _restore(t._queue, item.id, undo)
    t._queue[item.id] = stored
    return stored


def _take_queued(t: MemoryTables, op: TakeQueued, undo: Undo) -> None:
    queued = t._queue.get(op.item_id)
    if queued is None:
        raise NotFound(f"no queued input {op.item_id!r}")
    if queued.status != "queued":
        raise Conflict(f"queued input {op.item_id!r} was already {queued.status}")
    _restore(t._queue, op.item_id, undo)
    t._queue[op.item_id] = dataclasses.replace(queued, status=op.status)


def _edit_queued(t: MemoryTables, op: EditQueued, undo: Undo) -> None:
    queued = t._queue.get(op.item_id)
    if queued is None or queued.conversation_id != op.conversation_id:
        raise NotFound(f"no queued input {op.item_id!r}")
    if queued.status != "queued":
        raise Conflict(f"queued input {op.item_id!r} was already {queued.status}")
    _restore(t._queue, op.item_id, undo)
    if op.message is None:
        t._queue[op.item_id] = dataclasses.replace(queued, status="dropped")
    else:
        t._queue[op.item_id] = dataclasses.replace(queued, message=op.message)


def _set_tool_switch(t: MemoryTables, op: SetToolSwitch, undo: Undo) -> None:
    _restore(t._switches, (op.scope, op.tool), undo)
    t._switches[op.scope, op.tool] = op.enabled


# --- long-term memory -------------------------------------------------------------------


def _fact(t: MemoryTables, scope: str, memory_id: str) -> MemoryFact:
    fact = t._memories.get(memory_id)
    if fact is None or fact.scope != scope:
        raise NotFound(f"no memory {memory_id!r}")
    return fact


def _close_fact(
    t: MemoryTables, fact: MemoryFact, when: datetime, superseded_by: str | None, undo: Undo
) -> MemoryFact:
    closed = dataclasses.replace(fact, valid_to=when, superseded_by=superseded_by)
    _restore(t._memories, fact.id, undo)
    t._memories[fact.id] = closed
    return closed


def _remember(t: MemoryTables, op: RememberFact, undo: Undo) -> MemoryFact:
    text = check_fact_text(op.text)
    now = utcnow()
    fact_id = op.id or new_id()
    if fact_id in t._memories:
        raise StoreError(f"memory {fact_id!r} exists")
    if op.supersedes is not None:
        old = _fact(t, op.scope, op.supersedes)
        if not old.current:
            raise Conflict(f"memory {op.supersedes!r} is already closed")
        _close_fact(t, old, now, fact_id, undo)
    count = sum(1 for f in t._memories.values() if f.scope == op.scope and f.current)
    if count >= op.capacity:
        raise MemoryFull(count, op.capacity)
    fact = MemoryFact(
        id=fact_id,
        scope=op.scope,
        text=text,
        valid_from=op.valid_from or op.recorded_at or now,
        recorded_at=op.recorded_at or now,
        subject=normalize_subject(op.subject),
        supersedes=op.supersedes,
        conversation_id=op.conversation_id,
        turn_id=op.turn_id,
    )
    _restore(t._memories, fact_id, undo)
    t._memories[fact_id] = fact
    return fact


def _forget(t: MemoryTables, op: ForgetFact, undo: Undo) -> MemoryFact:
    fact = _fact(t, op.scope, op.memory_id)
    if not fact.current:
        return fact
    return _close_fact(t, fact, utcnow(), None, undo)


Write = Callable[[MemoryTables, Any, Undo], Any]

WRITES: dict[type, Write] = {
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
    RememberFact: _remember,
    ForgetFact: _forget,
    SetToolSwitch: _set_tool_switch,
    DeleteConversation: delete_conversation,
    EraseOwner: erase_owner,
    **ACCOUNT_WRITES,
    **RELATION_WRITES,
    **FORGED_WRITES,
    **MCP_SERVER_WRITES,
    **JOB_WRITES,
    **TREE_WRITES,
    SettleSpend: settle_write,
    TabSpend: tab_write,
    CloseTab: close_write,
}
"""One write function per op type; ``tests/store`` checks every ``WriteOp`` has one."""
