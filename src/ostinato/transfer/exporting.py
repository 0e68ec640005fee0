"""Writing an export: the JSON file (``transfer.document``) and a readable Markdown one.

Both are produced piece by piece (an async iterator of text): the messages are read from
the store a page at a time, so an export of any size holds one page in memory, and a
route streams it as it is made.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

from ostinato.approvals import Approval
from ostinato.messages import (
    FileBlock,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    blocks_to_json,
)
from ostinato.store.base import Conversation, Store, ToolCallRecord, Turn, utcnow
from ostinato.store.tree import WHOLE
from ostinato.transfer.document import FORMAT, VERSION
from ostinato.transfer.memories import memories_json

PAGE = 500  # messages read from the store at a time


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def turn_row(turn: Turn) -> dict[str, Any]:
    return {
        "id": turn.id,
        "run_id": turn.run_id,
        "kind": turn.kind,
        "status": turn.status,
        "stop_reason": turn.stop_reason,
        "started_at": _time(turn.started_at),
        "finished_at": _time(turn.finished_at),
        "metrics": turn.metrics,
        "error": turn.error,
        "timeline": turn.timeline,
    }


def tool_call_row(call: ToolCallRecord) -> dict[str, Any]:
    return {
        "id": call.id,
        "turn_id": call.turn_id,
        "name": call.name,
        "input": call.input,
        "status": call.status,
        "started_at": _time(call.started_at),
        "finished_at": _time(call.finished_at),
        "duration_s": call.duration_s,
        "result": call.result,
        "is_error": call.is_error,
    }


def approval_row(approval: Approval) -> dict[str, Any]:
    return {
        "id": approval.id,
        "turn_id": approval.turn_id,
        "tool_use_id": approval.tool_use_id,
        "tool": approval.tool,
        "arguments": approval.arguments,
        "arguments_hash": approval.arguments_hash,
        "risk": approval.risk,
        "family": approval.family,
        "requested_at": _time(approval.requested_at),
        "status": approval.status,
        "ending": None if approval.ending is None else str(approval.ending),
        "decided_at": _time(approval.decided_at),
        "decided_by": approval.decided_by,
        "remember": approval.remember,
    }


def message_row(message: Message) -> dict[str, Any]:
    return {
        "seq": message.seq,
        "parent_seq": message.parent_seq or 0,
        "role": message.role,
        "blocks": blocks_to_json(message.blocks),
        "hidden": message.hidden,
        "metadata": message.metadata,
        "turn_id": message.turn_id,
        "created_at": _time(message.created_at),
    }


async def all_rows(
    store: Store, conversation_id: str, *, include_hidden: bool = True, branch: Any = WHOLE
) -> AsyncIterator[Message]:
    """The conversation's rows in seq order, a page at a time."""
    after = 0
    while True:
        page = await store.list_messages(
            conversation_id,
            after_seq=after,
            limit=PAGE,
            include_hidden=include_hidden,
            branch=branch,
        )
        for message in page:
            yield message
        if len(page) < PAGE:
            return
        after = page[-1].seq or after


async def branch_tip(store: Store, conversation: Conversation) -> int:
    """The last row of the branch the conversation is on (0: none)."""
    tree = await store.tree(conversation.id)
    return 0 if tree is None else tree.leaf


async def conversation_json(store: Store, conversation: Conversation) -> AsyncIterator[str]:
    """One conversation of the export file, in pieces."""
    cid = conversation.id
    head = {
        "id": cid,
        "title": conversation.title,
        "persona": conversation.persona,
        "metadata": conversation.metadata,
        "state": conversation.state,
        "pinned": conversation.pinned,
        "archived_at": _time(conversation.archived_at),
        "created_at": _time(conversation.created_at),
        "updated_at": _time(conversation.updated_at),
        "branch_tip": await branch_tip(store, conversation),
        "turns": [turn_row(t) for t in await store.list_turns(cid)],
        "tool_calls": [tool_call_row(c) for c in await store.list_tool_calls(cid)],
        "approvals": [approval_row(a) for a in await store.list_approvals(cid)],
    }
    yield _dump(head)[:-1] + ',"messages":['
    first = True
    async for message in all_rows(store, cid):
        yield ("" if first else ",") + _dump(message_row(message))
        first = False
    yield "]}"


async def export_json(
    store: Store,
    conversations: AsyncIterator[Conversation] | Sequence[Conversation],
    owner: str,
    *,
    memories: bool = False,
) -> AsyncIterator[str]:
    """The export file of ``conversations`` (``owner``'s), in pieces; with ``memories``,
    the owner's current facts too (``transfer.memories``)."""
    head = {"format": FORMAT, "version": VERSION, "exported_at": _time(utcnow()), "owner": owner}
    yield _dump(head)[:-1] + ',"conversations":['
    first = True
    async for conversation in _each(conversations):
        if not first:
            yield ","
        first = False
        async for piece in conversation_json(store, conversation):
            yield piece
    if memories:
        yield '],"memories":['
        async for piece in memories_json(store, owner):
            yield piece
    yield "]}\n"


async def _each(
    conversations: AsyncIterator[Conversation] | Sequence[Conversation],
) -> AsyncIterator[Conversation]:
    if isinstance(conversations, Sequence):
        for conversation in conversations:
            yield conversation
    else:
        async for conversation in conversations:
            yield conversation


async def owner_conversations(store: Store, owner: str | None) -> AsyncIterator[Conversation]:
    """Every conversation of ``owner`` (archived ones too; None: every owner's), newest
    first, a page at a time."""
    before: str | None = None
    while True:
        page = await store.list_conversations(owner=owner, limit=100, before=before)
        for conversation in page:
            yield conversation
        if len(page) < 100:
            return
        before = page[-1].id


# --- Markdown ----------------------------------------------------------------------------

SPEAKER = {"user": "You", "assistant": "Assistant", "system": "System", "tool": "Tool"}


def _fence(text: str) -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}\n{text}\n{ticks}"


def block_markdown(block: Any) -> str:
    """One block as Markdown."""
    match block:
        case TextBlock():
            return str(block.text)
        case ThinkingBlock():
            return ""
        case ToolUseBlock():
            args = json.dumps(block.input, ensure_ascii=False, indent=2)
            return f"**Tool call** `{block.name}`:\n\n{_fence(args)}"
        case ToolResultBlock():
            label = "Tool error" if block.is_error else "Tool result"
            return f"**{label}**:\n\n{_fence(block.text)}"
        case ImageBlock() | FileBlock():
            name = (block.name if isinstance(block, FileBlock) else None) or "image"
            return f"*Attached: {name} ({block.media_type})*"
    return ""


def message_markdown(message: Message) -> str:
    parts = [p for p in (block_markdown(b) for b in message.blocks) if p]
    if not parts:
        return ""
    when = message.created_at.strftime("%Y-%m-%d %H:%M UTC") if message.created_at else ""
    heading = f"### {SPEAKER.get(message.role, message.role)} · {when} · #{message.seq}"
    return heading + "\n\n" + "\n\n".join(parts) + "\n\n"


async def conversation_markdown(store: Store, conversation: Conversation) -> AsyncIterator[str]:
    """The conversation's current branch as Markdown (its visible rows), in pieces."""
    title = conversation.title or "Untitled conversation"
    yield (
        f"# {title}\n\n"
        f"Conversation `{conversation.id}`, started "
        f"{conversation.created_at.strftime('%Y-%m-%d %H:%M UTC')}. "
        "This is the branch it is on; the JSON export holds every branch.\n\n"
    )
    async for message in all_rows(
        store, conversation.id, include_hidden=False, branch=conversation.branch
    ):
        text = message_markdown(message)
        if text:
            yield text
