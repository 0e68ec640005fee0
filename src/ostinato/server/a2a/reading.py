"""Tasks read from the store: a task's id is the id of the turn its message began, its
context the conversation (``ostinato.exchanges`` says which turns belong to it and what
state it is in). Another owner's task, or a turn that begins no task, is not found,
exactly like a missing one."""

from __future__ import annotations

import base64
from dataclasses import dataclass

from ostinato.exchanges import Exchange, exchange_of, exchanges, status
from ostinato.messages import Message
from ostinato.runtime import Runtime
from ostinato.server.a2a.tasks import TaskView
from ostinato.server.a2a.wire import STATES, InvalidParams, Listing, TaskNotFound
from ostinato.server.auth import Caller
from ostinato.server.waiting import what_waits
from ostinato.store.base import Conversation

PAGE = 500
CONVERSATIONS = 200  # conversations a listing without a context looks through


@dataclass(frozen=True, slots=True)
class Found:
    """A task's conversation and exchange."""

    conversation: Conversation
    exchange: Exchange


async def find(runtime: Runtime, caller: Caller, task_id: str) -> Found:
    """The task ``task_id`` of the caller's; ``TaskNotFound`` otherwise."""
    turn = await runtime.store.get_turn(task_id)
    conversation = await runtime.store.get_conversation(turn.conversation_id) if turn else None
    if turn is None or conversation is None or not caller.owns(conversation):
        raise TaskNotFound(f"no task with id {task_id!r}")
    exchange = exchange_of(await runtime.store.list_turns(conversation.id), task_id)
    if exchange is None:
        raise TaskNotFound(f"no task with id {task_id!r}")
    return Found(conversation, exchange)


async def context_of(runtime: Runtime, caller: Caller, context_id: str) -> Conversation:
    """The caller's conversation ``context_id``; ``TaskNotFound`` otherwise (a context
    is found through its tasks)."""
    conversation = await runtime.store.get_conversation(context_id)
    if conversation is None or not caller.owns(conversation):
        raise TaskNotFound(f"no context with id {context_id!r}")
    return conversation


async def view(
    runtime: Runtime, found: Found, *, rows: bool = True, fresh: bool = False
) -> TaskView:
    """What the task shows now (its rows left out with ``rows=False``); its turns are
    read again unless ``fresh`` says they were just read."""
    store, conversation = runtime.store, found.conversation
    if not fresh:
        turns = await store.list_turns(conversation.id)
        exchange = exchange_of(turns, found.exchange.id) or found.exchange
        found = Found(conversation, exchange)
    exchange = found.exchange
    pending = await store.list_approvals(conversation.id, pending_only=True)
    waits = any(a.turn_id == exchange.last.id for a in pending)
    current = await store.get_conversation(conversation.id) or conversation
    state = status(exchange, current.state, waits)
    waiting = await what_waits(runtime, conversation.id) if state == "input_required" else None
    last = exchange.last
    read, seq = await rows_of(runtime, found) if rows else ([], 0)
    return TaskView(
        id=exchange.id,
        context_id=conversation.id,
        status=state,
        rows=tuple(read),
        updated_at=last.finished_at or last.started_at,
        waiting=waiting,
        error=last.error if state == "failed" else None,
        read_through=seq,
    )


async def rows_of(runtime: Runtime, found: Found) -> tuple[list[Message], int]:
    """The rows of the task's turns, in seq order, and the conversation's last seq read
    (a stream goes on from there)."""
    ids, after_seq = found.exchange.turn_ids, 0
    out: list[Message] = []
    cid = found.conversation.id
    while True:
        page = await runtime.store.list_messages(cid, after_seq=after_seq, limit=PAGE)
        out.extend(row for row in page if row.turn_id in ids)
        after_seq = page[-1].seq or after_seq if page else after_seq
        if len(page) < PAGE:
            return out, after_seq


async def listing(
    runtime: Runtime, caller: Caller, asked: Listing
) -> tuple[list[TaskView], int, str]:
    """One page of the caller's tasks, most recently updated first, how many there are in
    all, and the token of the next page (``""`` after the last)."""
    if asked.context_id is not None:
        conversations = [await context_of(runtime, caller, asked.context_id)]
    else:
        owner = None if caller.sees_everything else caller.owner
        conversations = await runtime.store.list_conversations(owner=owner, limit=CONVERSATIONS)
    rows = asked.include_artifacts or bool(asked.history_length)
    views: list[TaskView] = []
    for conversation in conversations:
        for exchange in exchanges(await runtime.store.list_turns(conversation.id)):
            found = Found(conversation, exchange)
            views.append(await view(runtime, found, rows=rows, fresh=True))
    if asked.status is not None:
        views = [v for v in views if STATES[v.status] == asked.status]
    views.sort(key=_order, reverse=True)
    total = len(views)
    if asked.page_token is not None:
        after = _cursor(asked.page_token)
        views = [v for v in views if _order(v) < after]
    page, rest = views[: asked.page_size], views[asked.page_size :]
    return page, total, (_token(page[-1]) if rest else "")


def _order(view: TaskView) -> tuple[str, str]:
    return (view.updated_at.isoformat(), view.id)


def _token(view: TaskView) -> str:
    stamp, task = _order(view)
    return base64.urlsafe_b64encode(f"{stamp}|{task}".encode()).decode()


def _cursor(token: str) -> tuple[str, str]:
    try:
        stamp, task = base64.urlsafe_b64decode(token.encode()).decode().split("|", 1)
    except (ValueError, UnicodeDecodeError):
        raise InvalidParams("pageToken is not a token a listing gave") from None
    return stamp, task
