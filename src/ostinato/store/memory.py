"""An in-memory store: the reference semantics of ``Store``, for tests and benchmarks.

A ``write`` applies its ops in order, each checking before it changes anything and
leaving an undo step; if an op raises, the undo steps run in reverse, so the write
commits all of its ops or none.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from datetime import datetime
from typing import Any, assert_never

from ostinato.approvals import Approval, Grant
from ostinato.errors import Conflict, NotFound, StoreError
from ostinato.ids import new_id
from ostinato.messages import Message
from ostinato.store.base import (
    STATE_AFTER,
    AppendMessage,
    AppendSummary,
    Conversation,
    CreateApproval,
    CreateConversation,
    CreateGrant,
    DecideApproval,
    Enqueue,
    FinishToolCall,
    FinishTurn,
    ForgetFact,
    HistoryWindow,
    MemoryConflict,
    MemoryFact,
    MemoryFull,
    MemoryHit,
    QueuedInput,
    RememberFact,
    RevokeGrant,
    SetConversationState,
    SetToolSwitch,
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
from ostinato.store.search import overlap_score, search_terms

Undo = list[Callable[[], None]]


def _restore(table: dict[Any, Any], key: Any, undo: Undo) -> None:
    """Record how to put ``table[key]`` back as it is now."""
    if key in table:
        old = table[key]
        undo.append(lambda: table.__setitem__(key, old))
    else:
        undo.append(lambda: table.pop(key, None))


class MemoryStore:
    def __init__(self) -> None:
        self._conversations: dict[str, Conversation] = {}
        self._messages: dict[str, list[Message]] = {}
        self._turns: dict[str, Turn] = {}
        self._tool_calls: dict[tuple[str, str], ToolCallRecord] = {}
        self._updated: dict[str, datetime] = {}  # updated_at, kept apart: appends are hot
        self._approvals: dict[str, Approval] = {}
        self._grants: dict[str, Grant] = {}
        self._queue: dict[str, QueuedInput] = {}
        self._positions = itertools.count(1)
        self._summaries: dict[str, tuple[Message, int]] = {}  # the watermark per conversation
        self._switches: dict[tuple[str, str], bool] = {}  # (scope, tool) -> enabled
        self._memories: dict[str, MemoryFact] = {}  # every fact, current or closed

    def _set_summary(self, cid: str, value: tuple[Message, int] | None) -> None:
        if value is None:
            self._summaries.pop(cid, None)
        else:
            self._summaries[cid] = value

    async def write(self, *ops: WriteOp) -> list[Any]:
        undo: Undo = []
        try:
            return [self._apply(op, undo) for op in ops]
        except BaseException:
            for step in reversed(undo):
                step()
            raise

    def _conversation(self, cid: str) -> Conversation:
        found = self._conversations.get(cid)
        if found is None:
            raise NotFound(f"no conversation {cid!r}")
        return found

    def _set_state(self, cid: str, state: Any, undo: Undo) -> None:
        conversation = self._conversation(cid)
        _restore(self._conversations, cid, undo)
        _restore(self._updated, cid, undo)
        c = conversation  # a hot path: built by hand rather than by dataclasses.replace
        self._conversations[cid] = Conversation(
            c.id, state, c.created_at, c.updated_at, c.owner, c.persona, c.title, c.metadata
        )
        self._updated[cid] = utcnow()

    def _apply(self, op: WriteOp, undo: Undo) -> Any:  # noqa: C901 - one arm per op
        kind = type(op)  # the turn loop's own ops first: a match tries its arms in order
        if kind is AppendMessage:
            return self._append(op, undo)  # type: ignore[arg-type]
        if kind is StartToolCall or kind is FinishToolCall:
            return self._tool_call(op, undo)  # type: ignore[arg-type]
        match op:
            case CreateConversation(conversation=conv):
                if conv.id in self._conversations:
                    raise StoreError(f"conversation {conv.id!r} exists")
                _restore(self._conversations, conv.id, undo)
                _restore(self._messages, conv.id, undo)
                self._conversations[conv.id] = conv
                self._messages[conv.id] = []
            case SetConversationState(conversation_id=cid, state=state):
                self._set_state(cid, state, undo)
            case StartTurn(turn=turn):
                self._conversation(turn.conversation_id)
                if turn.id in self._turns:
                    raise StoreError(f"turn {turn.id!r} exists")
                _restore(self._turns, turn.id, undo)
                self._turns[turn.id] = turn
            case FinishTurn():
                return self._finish_turn(op, undo)
            case AppendMessage():
                return self._append(op, undo)
            case AppendSummary():
                row = self._append(AppendMessage(op.conversation_id, op.message, op.turn_id), undo)
                previous = self._summaries.get(op.conversation_id)
                undo.append(lambda: self._set_summary(op.conversation_id, previous))
                self._summaries[op.conversation_id] = (row, op.through_seq)
                return row
            case StartToolCall() | FinishToolCall():
                return self._tool_call(op, undo)
            case CreateApproval(approval=approval):
                self._conversation(approval.conversation_id)
                if approval.id in self._approvals:
                    raise StoreError(f"approval {approval.id!r} exists")
                _restore(self._approvals, approval.id, undo)
                self._approvals[approval.id] = approval
            case DecideApproval():
                return self._decide(op, undo)
            case CreateGrant(grant=grant):
                if grant.id in self._grants:
                    raise StoreError(f"grant {grant.id!r} exists")
                _restore(self._grants, grant.id, undo)
                self._grants[grant.id] = grant
            case RevokeGrant(grant_id=gid, revoked_at=when):
                found = self._grants.get(gid)
                if found is None:
                    raise NotFound(f"no grant {gid!r}")
                if found.revoked_at is None:
                    _restore(self._grants, gid, undo)
                    self._grants[gid] = dataclasses.replace(found, revoked_at=when)
            case Enqueue(item=item):
                self._conversation(item.conversation_id)
                if item.id in self._queue:
                    raise StoreError(f"queued input {item.id!r} exists")
                stored = dataclasses.replace(item, position=next(self._positions), status="queued")
                _restore(self._queue, item.id, undo)
                self._queue[item.id] = stored
                return stored
            case TakeQueued(item_id=iid, status=status):
                queued = self._queue.get(iid)
                if queued is None:
                    raise NotFound(f"no queued input {iid!r}")
                if queued.status != "queued":
                    raise Conflict(f"queued input {iid!r} was already {queued.status}")
                _restore(self._queue, iid, undo)
                self._queue[iid] = dataclasses.replace(queued, status=status)
            case RememberFact():
                return self._remember(op, undo)
            case ForgetFact(scope=scope, memory_id=mid):
                fact = self._fact(scope, mid)
                if not fact.current:
                    return fact
                return self._close_fact(fact, utcnow(), None, undo)
            case SetToolSwitch(scope=scope, tool=tool, enabled=enabled):
                _restore(self._switches, (scope, tool), undo)
                self._switches[scope, tool] = enabled
            case _:
                assert_never(op)
        return None

    def _tool_call(self, op: StartToolCall | FinishToolCall, undo: Undo) -> None:
        if type(op) is StartToolCall:
            record = op.record
            key = (record.turn_id, record.id)
            if key in self._tool_calls:
                raise StoreError(f"tool call {record.id!r} already recorded")
            _restore(self._tool_calls, key, undo)
            self._tool_calls[key] = record
            return
        assert isinstance(op, FinishToolCall)
        key = (op.turn_id, op.tool_call_id)
        started = self._tool_calls.get(key)
        if started is None:
            raise NotFound(f"no tool call {op.tool_call_id!r}")
        _restore(self._tool_calls, key, undo)
        self._tool_calls[key] = ToolCallRecord(
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

    def _finish_turn(self, op: FinishTurn, undo: Undo) -> None:
        turn = self._turns.get(op.turn_id)
        if turn is None:
            raise NotFound(f"no turn {op.turn_id!r}")
        self._conversation(op.conversation_id)
        _restore(self._turns, op.turn_id, undo)
        self._turns[op.turn_id] = Turn(
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
        )
        self._set_state(op.conversation_id, STATE_AFTER[op.stop_reason], undo)

    def _append(self, op: AppendMessage, undo: Undo) -> Message:
        self._conversation(op.conversation_id)
        rows = self._messages[op.conversation_id]
        message, now = op.message, utcnow()
        stored = Message(
            message.role,
            message.blocks,
            message.hidden,
            message.metadata,
            (rows[-1].seq or 0) + 1 if rows else 1,
            message.id or new_id(),
            op.turn_id,
            now,
        )
        rows.append(stored)
        undo.append(lambda: rows.remove(stored))
        _restore(self._updated, op.conversation_id, undo)
        self._updated[op.conversation_id] = now
        return stored

    def _decide(self, op: DecideApproval, undo: Undo) -> Approval:
        approval = self._approvals.get(op.approval_id)
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
        _restore(self._approvals, op.approval_id, undo)
        self._approvals[op.approval_id] = decided
        return decided

    # --- long-term memory -------------------------------------------------------------

    def _fact(self, scope: str, memory_id: str) -> MemoryFact:
        fact = self._memories.get(memory_id)
        if fact is None or fact.scope != scope:
            raise NotFound(f"no memory {memory_id!r}")
        return fact

    def _close_fact(
        self, fact: MemoryFact, when: datetime, superseded_by: str | None, undo: Undo
    ) -> MemoryFact:
        closed = dataclasses.replace(fact, valid_to=when, superseded_by=superseded_by)
        _restore(self._memories, fact.id, undo)
        self._memories[fact.id] = closed
        return closed

    def _remember(self, op: RememberFact, undo: Undo) -> MemoryFact:
        text = check_fact_text(op.text)
        now = utcnow()
        fact_id = op.id or new_id()
        if fact_id in self._memories:
            raise StoreError(f"memory {fact_id!r} exists")
        if op.supersedes is not None:
            old = self._fact(op.scope, op.supersedes)
            if not old.current:
                raise Conflict(f"memory {op.supersedes!r} is already closed")
            self._close_fact(old, now, fact_id, undo)
        count = sum(1 for f in self._memories.values() if f.scope == op.scope and f.current)
        if count >= op.capacity:
            raise MemoryFull(count, op.capacity)
        fact = MemoryFact(
            id=fact_id,
            scope=op.scope,
            text=text,
            valid_from=op.valid_from or now,
            recorded_at=now,
            subject=normalize_subject(op.subject),
            supersedes=op.supersedes,
            conversation_id=op.conversation_id,
            turn_id=op.turn_id,
        )
        _restore(self._memories, fact_id, undo)
        self._memories[fact_id] = fact
        return fact

    async def get_memory(self, memory_id: str) -> MemoryFact | None:
        return self._memories.get(memory_id)

    def _scope_facts(self, scope: str, include_closed: bool) -> list[MemoryFact]:
        return sorted(
            (
                f
                for f in self._memories.values()
                if f.scope == scope and (include_closed or f.current)
            ),
            key=lambda f: (f.recorded_at, f.id),
            reverse=True,
        )

    async def list_memories(
        self, scope: str, *, include_closed: bool = False, limit: int = 100
    ) -> list[MemoryFact]:
        return self._scope_facts(scope, include_closed)[:limit]

    async def search_memories(self, scope: str, query: str, *, limit: int = 10) -> list[MemoryHit]:
        terms = search_terms(query)
        if not terms:
            return []
        hits = [
            MemoryHit(f, score)
            for f in self._scope_facts(scope, False)
            if (score := overlap_score(terms, f.text, f.subject)) > 0
        ]
        hits.sort(key=lambda h: h.score, reverse=True)  # stable: newer first among equals
        return hits[:limit]

    async def memory_conflicts(self, scope: str) -> list[MemoryConflict]:
        by_subject: dict[str, list[MemoryFact]] = {}
        for fact in reversed(self._scope_facts(scope, False)):
            if fact.subject is not None:
                by_subject.setdefault(fact.subject, []).append(fact)
        return [
            MemoryConflict(subject, facts)
            for subject, facts in sorted(by_subject.items())
            if len({f.text for f in facts}) > 1
        ]

    # --- reads -----------------------------------------------------------------------

    def _current(self, conversation: Conversation) -> Conversation:
        updated = self._updated.get(conversation.id)
        if updated is None or updated == conversation.updated_at:
            return conversation
        return dataclasses.replace(conversation, updated_at=updated)

    async def get_conversation(self, conversation_id: str) -> Conversation | None:
        found = self._conversations.get(conversation_id)
        return self._current(found) if found is not None else None

    async def list_conversations(
        self, *, owner: str | None = None, limit: int = 50, before: str | None = None
    ) -> list[Conversation]:
        rows = sorted(
            (self._current(c) for c in self._conversations.values()),
            key=lambda c: c.id,
            reverse=True,
        )
        if owner is not None:
            rows = [c for c in rows if c.owner == owner]
        if before is not None:
            rows = [c for c in rows if c.id < before]
        return rows[:limit]

    async def list_messages(
        self,
        conversation_id: str,
        *,
        after_seq: int = 0,
        limit: int | None = None,
        include_hidden: bool = True,
    ) -> list[Message]:
        rows = [
            m
            for m in self._messages.get(conversation_id, [])
            if (m.seq or 0) > after_seq and (include_hidden or not m.hidden)
        ]
        return rows[:limit] if limit is not None else rows

    async def window(self, conversation_id: str, *, limit: int) -> HistoryWindow:
        rows = self._messages.get(conversation_id, [])
        summary, through = self._summaries.get(conversation_id, (None, 0))
        picked: list[Message] = []
        more = False
        for row in reversed(rows):
            if (row.seq or 0) <= through:
                break
            if row.metadata.get("kind") == "summary":  # only the watermark's own row
                continue
            if len(picked) == limit:
                more = True
                break
            picked.append(row)
        picked.reverse()
        return HistoryWindow(summary, picked, more)

    async def get_turn(self, turn_id: str) -> Turn | None:
        return self._turns.get(turn_id)

    async def list_turns(self, conversation_id: str) -> list[Turn]:
        return [t for t in self._turns.values() if t.conversation_id == conversation_id]

    async def running_turns(self) -> list[Turn]:
        return [t for t in self._turns.values() if t.status == "running"]

    async def list_tool_calls(
        self, conversation_id: str, *, turn_id: str | None = None
    ) -> list[ToolCallRecord]:
        return [
            r
            for r in self._tool_calls.values()
            if r.conversation_id == conversation_id and (turn_id is None or r.turn_id == turn_id)
        ]

    async def get_approval(self, approval_id: str) -> Approval | None:
        return self._approvals.get(approval_id)

    async def list_approvals(
        self, conversation_id: str | None = None, *, pending_only: bool = False
    ) -> list[Approval]:
        return [
            a
            for a in self._approvals.values()
            if (conversation_id is None or a.conversation_id == conversation_id)
            and (not pending_only or a.status == "pending")
        ]

    async def get_grant(self, grant_id: str) -> Grant | None:
        return self._grants.get(grant_id)

    async def list_grants(
        self,
        *,
        owner: str | None = None,
        conversation_id: str | None = None,
        include_revoked: bool = False,
    ) -> list[Grant]:
        return [
            g
            for g in self._grants.values()
            if (
                (owner is not None and g.owner == owner)
                or (conversation_id is not None and g.conversation_id == conversation_id)
            )
            and (include_revoked or g.revoked_at is None)
        ]

    async def list_queued(self, conversation_id: str | None = None) -> list[QueuedInput]:
        return sorted(
            (
                q
                for q in self._queue.values()
                if q.status == "queued"
                and (conversation_id is None or q.conversation_id == conversation_id)
            ),
            key=lambda q: q.position,
        )

    async def switched_off_tools(self, scope: str) -> frozenset[str]:
        return frozenset(t for (s, t), on in self._switches.items() if s == scope and not on)

    async def close(self) -> None:
        return None
