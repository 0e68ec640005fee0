"""A2A's methods on the runtime: each reads its params (``wire``), acts through the
runtime, and answers from the store (``reading``) or the task's frames (``updates``).

- ``SendMessage`` / ``SendStreamingMessage`` without a ``taskId`` begin a task: a turn
  in the conversation the ``contextId`` names (one of the caller's, or a new one with
  that id), or in a new conversation. One task works at a time in a context: a message
  while one works is refused (``UnsupportedOperationError``). A message sent while a task
  waits dismisses what it waited for (the task ends ``canceled``), as a typed message
  does on every surface.
- With the ``taskId`` of a task in ``input-required``, the message answers what waits
  (``yes`` / ``always`` / ``no`` for an approval, the answer or an option for a question
  card; ``ostinato.answers``); the task goes on. Anything else is refused, saying what
  the task waits for; a task working or ended takes no message.
- ``SendMessage`` waits until the task ends or needs input (``returnImmediately``: not);
  the streaming methods send the task's events (``updates``) until it ends, or, for
  ``SendStreamingMessage``, until it needs input. A stream that drops loses nothing:
  ``SubscribeToTask`` sends the task as stored, then what happens after.
- ``CancelTask`` cancels the running turn, or resolves what a waiting task waits for.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from ostinato.answers import AnswerCard, Decide, describe, interpret
from ostinato.background.stage_one import BACKGROUND_SUFFIX, is_reserved
from ostinato.bus import Subscription
from ostinato.errors import Conflict
from ostinato.exchanges import TERMINAL
from ostinato.frames import ErrorFrame
from ostinato.messages import JSON
from ostinato.server.a2a import reading
from ostinato.server.a2a.reading import Found
from ostinato.server.a2a.tasks import TaskView, task_json
from ostinato.server.a2a.updates import Updates
from ostinato.server.a2a.wire import (
    STATES,
    Incoming,
    InvalidParams,
    TaskNotCancelable,
    TaskNotFound,
    Unsupported,
    read_list,
    task_id,
)
from ostinato.server.auth import Caller
from ostinato.server.context import ServerContext
from ostinato.server.routes.turns import release_when_done
from ostinato.server.streams import Live, conversation_frames, subscription_frames
from ostinato.server.waiting import what_waits
from ostinato.store.base import Conversation, CreateConversation, utcnow

CONTEXT_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
Events = AsyncGenerator[JSON | None, None]


async def target(
    context: ServerContext, caller: Caller, incoming: Incoming
) -> tuple[Conversation, Found | None]:
    """The conversation a message goes to, and the task it answers (``None``: it begins
    one). Read before acting, so a stream can subscribe to the conversation first."""
    if incoming.task_id is None:
        return await _conversation(context, caller, incoming.context_id), None
    found = await reading.find(context.runtime, caller, incoming.task_id)
    if incoming.context_id not in (None, found.conversation.id):
        raise InvalidParams(f"contextId {incoming.context_id!r} is not the task's context")
    return found.conversation, found


@dataclass(frozen=True, slots=True)
class Sent:
    """The task a message went to, and what it looked like as the message was acted on
    (a stream starts from there: it then reads every frame since, none is missed)."""

    found: Found
    start: TaskView


async def send(
    context: ServerContext,
    caller: Caller,
    agent: str | None,
    incoming: Incoming,
    conversation: Conversation,
    answers: Found | None,
) -> Sent:
    """Act on a message: answer what the task ``answers`` waits for, or begin a task in
    ``conversation``."""
    runtime = context.runtime
    if answers is not None:
        before = await _answer(context, incoming, answers)
        found = await reading.find(runtime, caller, answers.exchange.id)
        return Sent(found, dataclasses.replace(before, status="working", waiting=None))
    permit = await context.owner_limits.begin_turn(caller.owner)
    try:
        submission = await runtime.submit(
            conversation.id,
            incoming.text,
            policy="reject",
            skill=agent,
            client_message_id=incoming.message_id or None,
        )
        handle = await submission.handle()
    except Conflict:
        permit.release()
        raise Unsupported(
            f"a task is working in context {conversation.id}: wait for it, answer it, or "
            "cancel it (CancelTask) before sending a new message"
        ) from None
    except BaseException:
        permit.release()
        raise
    release_when_done(permit, submission.started)
    found = await reading.find(runtime, caller, handle.turn.id)
    seq = max((row.seq or 0 for row in handle.rows), default=0)
    start = TaskView(handle.turn.id, conversation.id, "working", tuple(handle.rows),
                     handle.turn.started_at, read_through=seq)  # fmt: skip
    return Sent(found, start)


async def _answer(context: ServerContext, incoming: Incoming, found: Found) -> TaskView:
    """Answer what the task waits for; the task as it was just before."""
    runtime = context.runtime
    cid = found.conversation.id
    view = await reading.view(runtime, found)
    if view.status != "input_required":
        state = STATES[view.status]
        raise Unsupported(
            f"task {found.exchange.id} is {state}: it takes no message; send one without "
            "taskId (with its contextId) to begin a new task"
        )
    waiting = await what_waits(runtime, cid)
    reading_ = interpret(incoming.text, waiting)
    if isinstance(reading_, Decide):
        await runtime.decide(
            cid, reading_.approval_id, approve=reading_.approve, remember=reading_.remember
        )
    elif isinstance(reading_, AnswerCard):
        await runtime.answer_card(cid, reading_.tool_use_id, reading_.result)
    else:
        what = describe(waiting) if waiting is not None else "an answer"
        raise InvalidParams(f"this message does not answer what the task waits for: {what}")
    return view


async def _conversation(
    context: ServerContext, caller: Caller, context_id: str | None
) -> Conversation:
    """The caller's conversation ``context_id``, a new one with that id, or a new one."""
    runtime = context.runtime
    if context_id is None:
        return await runtime.create_conversation(owner=caller.owner, metadata={"surface": "a2a"})
    found = await runtime.store.get_conversation(context_id)
    if found is not None:
        if not caller.owns(found):
            raise TaskNotFound(f"no context with id {context_id!r}")
        return found
    if not CONTEXT_ID.match(context_id):
        raise InvalidParams("a new contextId is 1 to 64 letters, digits, '_' or '-'")
    if is_reserved(context_id):
        raise InvalidParams(f"contextIds ending {BACKGROUND_SUFFIX!r} are reserved")
    now = utcnow()
    conversation = Conversation(
        context_id, "idle", now, now, owner=caller.owner, metadata={"surface": "a2a"}
    )
    await runtime.store.write(CreateConversation(conversation))
    return conversation


async def follow(
    context: ServerContext,
    found: Found,
    subscription: Subscription,
    live: Live,
    *,
    until_input: bool,
    start: TaskView | None = None,
) -> Events:
    """The task as stored (or as it was at ``start``, the subscription opened before),
    then its events until it ends (or, ``until_input``, needs input); ``None`` for a
    silent while (a ping)."""
    runtime = context.runtime
    cid = found.conversation.id
    if start is None:
        view = await reading.view(runtime, found)
        after = view.read_through
        frames = conversation_frames(subscription, runtime.store, cid, live, after_seq=after)
    else:
        view, frames = start, subscription_frames(subscription, live)
    turns = found.exchange.turns
    updates = Updates.of(view, {t.id for t in turns}, {t.run_id for t in turns})
    yield updates.first()
    if view.status in TERMINAL or (until_input and view.status == "input_required"):
        await frames.aclose()
        return
    async for frame in frames:
        if frame is None:
            yield None
            continue
        if isinstance(frame, ErrorFrame):
            return  # the stream must stop (overflow, shutdown): the client resubscribes
        for event in updates.see(frame):
            yield event
        if updates.paused:
            yield updates.waiting(await what_waits(runtime, cid))
        if updates.done or (until_input and updates.state == "input_required"):
            return


async def settled(
    context: ServerContext, found: Found, events: Events, history: int | None
) -> JSON:
    """``SendMessage``'s answer: the task once the events end (it ended or needs input)."""
    async for _ in events:
        pass
    view = await reading.view(context.runtime, found)
    return {"task": task_json(view, history_length=history)}


async def get(context: ServerContext, caller: Caller, params: JSON) -> JSON:
    found = await reading.find(context.runtime, caller, task_id(params))
    view = await reading.view(context.runtime, found)
    return task_json(view, history_length=_history(params))


def _history(params: JSON) -> int | None:
    from ostinato.server.a2a.wire import history_length

    return history_length(params)


async def listed(context: ServerContext, caller: Caller, params: JSON) -> JSON:
    asked = read_list(params)
    views, total, token = await reading.listing(context.runtime, caller, asked)
    tasks = [
        task_json(v, history_length=asked.history_length or 0, artifacts=asked.include_artifacts)
        for v in views
    ]
    return {"tasks": tasks, "nextPageToken": token, "pageSize": asked.page_size,
            "totalSize": total}  # fmt: skip


async def cancel(context: ServerContext, caller: Caller, params: JSON) -> JSON:
    runtime = context.runtime
    found = await reading.find(runtime, caller, task_id(params))
    view = await reading.view(runtime, found, rows=False)
    if view.status in TERMINAL:
        raise TaskNotCancelable(f"task {found.exchange.id} is {STATES[view.status]} already")
    try:
        await runtime.cancel(found.conversation.id)
    except Conflict as refused:
        raise TaskNotCancelable(refused.message) from None
    return task_json(await reading.view(runtime, found))


async def subscribable(context: ServerContext, caller: Caller, params: JSON) -> Found:
    """The task ``SubscribeToTask`` names, if it has not ended."""
    found = await reading.find(context.runtime, caller, task_id(params))
    view = await reading.view(context.runtime, found, rows=False)
    if view.status in TERMINAL:
        raise Unsupported(
            f"task {found.exchange.id} is {STATES[view.status]}: there is nothing to follow "
            "(GetTask reads it)"
        )
    return found
