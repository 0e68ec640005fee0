"""An in-memory store: the reference semantics of ``Store``, for tests and benchmarks."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from ostinato.errors import NotFound, StoreError
from ostinato.ids import new_id
from ostinato.messages import Message
from ostinato.store.base import (
    STATE_AFTER,
    AppendMessage,
    Conversation,
    CreateConversation,
    FinishToolCall,
    FinishTurn,
    SetConversationState,
    StartToolCall,
    StartTurn,
    ToolCallRecord,
    Turn,
    WriteOp,
    utcnow,
)


class MemoryStore:
    def __init__(self) -> None:
        self._conversations: dict[str, Conversation] = {}
        self._messages: dict[str, list[Message]] = {}
        self._turns: dict[str, Turn] = {}
        self._tool_calls: dict[tuple[str, str], ToolCallRecord] = {}
        self._updated: dict[str, datetime] = {}  # updated_at, kept apart: appends are hot

    async def write(self, *ops: WriteOp) -> list[Any]:
        created = {o.conversation.id for o in ops if type(o) is CreateConversation}
        started = {o.turn.id for o in ops if type(o) is StartTurn}
        calls = {(o.record.turn_id, o.record.id) for o in ops if type(o) is StartToolCall}
        for op in ops:
            self._check(op, created, started, calls)
        return [self._apply(op) for op in ops]

    def _check(
        self,
        op: WriteOp,
        created: set[str],
        started: set[str],
        calls: set[tuple[str, str]],
    ) -> None:
        match op:
            case AppendMessage(conversation_id=cid) | SetConversationState(conversation_id=cid):
                if cid not in self._conversations and cid not in created:
                    raise NotFound(f"no conversation {cid!r}")
            case StartTurn(turn=turn):
                if (
                    turn.conversation_id not in self._conversations
                    and turn.conversation_id not in created
                ):
                    raise NotFound(f"no conversation {turn.conversation_id!r}")
            case FinishTurn(turn_id=tid):
                if tid not in self._turns and tid not in started:
                    raise NotFound(f"no turn {tid!r}")
            case StartToolCall(record=record):
                if (record.turn_id, record.id) in self._tool_calls:
                    raise StoreError(f"tool call {record.id!r} already recorded")
            case FinishToolCall(turn_id=tid, tool_call_id=tcid):
                if (tid, tcid) not in self._tool_calls and (tid, tcid) not in calls:
                    raise NotFound(f"no tool call {tcid!r}")
            case CreateConversation(conversation=conv):
                if conv.id in self._conversations:
                    raise StoreError(f"conversation {conv.id!r} exists")

    def _apply(self, op: WriteOp) -> Any:
        now = utcnow()
        match op:
            case CreateConversation(conversation=conv):
                self._conversations[conv.id] = conv
                self._messages[conv.id] = []
            case SetConversationState(conversation_id=cid, state=state):
                self._touch(cid, state=state)
            case StartTurn(turn=turn):
                self._turns[turn.id] = turn
            case FinishTurn():
                turn = self._turns[op.turn_id]
                self._turns[op.turn_id] = dataclasses.replace(
                    turn,
                    status="finished",
                    stop_reason=op.stop_reason,
                    finished_at=op.finished_at,
                    metrics=op.metrics,
                    error=op.error,
                )
                self._touch(op.conversation_id, state=STATE_AFTER[op.stop_reason])
            case AppendMessage(conversation_id=cid, message=message, turn_id=turn_id):
                rows = self._messages[cid]
                stored = Message(
                    message.role,
                    message.blocks,
                    message.hidden,
                    message.metadata,
                    (rows[-1].seq or 0) + 1 if rows else 1,
                    message.id or new_id(),
                    turn_id,
                    now,
                )
                rows.append(stored)
                self._updated[cid] = now
                return stored
            case StartToolCall(record=record):
                self._tool_calls[record.turn_id, record.id] = record
            case FinishToolCall():
                key = (op.turn_id, op.tool_call_id)
                self._tool_calls[key] = dataclasses.replace(
                    self._tool_calls[key],
                    status=op.status,
                    result=op.result,
                    is_error=op.is_error,
                    finished_at=op.finished_at,
                    duration_s=op.duration_s,
                )
        return None

    def _touch(self, cid: str, **changes: Any) -> None:
        self._conversations[cid] = dataclasses.replace(self._conversations[cid], **changes)
        self._updated[cid] = utcnow()

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

    async def close(self) -> None:
        return None
