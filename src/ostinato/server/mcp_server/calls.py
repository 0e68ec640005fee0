"""One MCP tool call: a message to an agent, answered when its turn ends or waits.

The call runs a turn in the conversation ``conversation_id`` names (one of the caller's;
another owner's is answered exactly like a missing one) or in a new one, and returns the
turn's replies as text, and in the structured result with ``conversation_id`` and
``stop_reason``. Each streamed piece of text is a progress notification (its ``message``). When an
approval or a question card waits, the call ends saying what waits and how to answer
(``ostinato.answers``), with ``waiting`` in the structured result; the next call in the
same conversation answers it (``yes`` / ``always`` / ``no``, an option or the answer),
as a typed answer does on every surface, and returns what follows.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from ostinato.answers import AnswerCard, Decide, WaitingApproval, WaitingCard, describe, interpret
from ostinato.errors import NotFound
from ostinato.frames import (
    ApprovalRequested,
    ErrorFrame,
    Frame,
    InputRequested,
    MessageCommitted,
    TextDeltaFrame,
    TurnFinished,
)
from ostinato.messages import JSON
from ostinato.server.auth import Caller
from ostinato.server.context import ServerContext
from ostinato.server.routes.turns import release_when_done
from ostinato.server.streams import run_frames, turn_frames
from ostinato.server.waiting import what_waits
from ostinato.submissions import TurnHandle

Progress = Callable[[str], Awaitable[None]]
Frames = AsyncGenerator[Frame | None, None]


@dataclass
class Answer:
    """What a call returns: the replies' text and the structured result, and what waits
    when the turn stopped for a person."""

    texts: list[str] = field(default_factory=list)
    result: JSON = field(default_factory=dict)
    waiting: WaitingApproval | WaitingCard | None = None

    @property
    def text(self) -> str:
        return "\n\n".join(t for t in self.texts if t.strip())


async def call_agent(
    context: ServerContext,
    caller: Caller,
    agent: str | None,
    message: str,
    conversation_id: str | None,
    progress: Progress,
    reading: Decide | AnswerCard | None = None,
) -> Answer:
    """Send ``message`` to ``agent`` (``None``: the router picks), or act on ``reading``
    (an elicitation's answer); the answer once the turn ends or waits for a person."""
    runtime = context.runtime
    cid = await _conversation(context, caller, conversation_id)
    subscription = runtime.bus.subscribe(cid)
    try:
        frames = await _act(context, caller, cid, agent, message, subscription, reading)
        answer = await _follow(frames, progress)
    finally:
        subscription.close()
    answer.result["conversation_id"] = cid
    answer.result["text"] = answer.text  # for clients that read the structured result only
    return answer


async def owned(context: ServerContext, caller: Caller, cid: str) -> str:
    """``cid`` when it is the caller's conversation (``NotFound`` otherwise)."""
    return await _conversation(context, caller, cid)


async def _conversation(context: ServerContext, caller: Caller, named: str | None) -> str:
    runtime = context.runtime
    if named is None:
        made = await runtime.create_conversation(owner=caller.owner, metadata={"surface": "mcp"})
        return made.id
    found = await runtime.store.get_conversation(named)
    if found is None or not caller.owns(found):
        raise NotFound(f"no conversation with id {named!r}")
    return found.id


async def _act(
    context: ServerContext,
    caller: Caller,
    cid: str,
    agent: str | None,
    message: str,
    sub: Any,
    reading: Decide | AnswerCard | None,
) -> Frames:
    runtime = context.runtime
    live = context.live
    read = reading or interpret(message, await what_waits(runtime, cid))
    if isinstance(read, Decide):
        await runtime.decide(cid, read.approval_id, approve=read.approve, remember=read.remember)
        return run_frames(sub, live)
    if isinstance(read, AnswerCard):
        handle = await runtime.answer_card(cid, read.tool_use_id, read.result)
        started: asyncio.Future[TurnHandle] = asyncio.get_running_loop().create_future()
        started.set_result(handle)
        return turn_frames(sub, started, live)
    permit = await context.owner_limits.begin_turn(caller.owner)
    try:
        submission = await runtime.submit(cid, message, policy="queue", skill=agent)
    except BaseException:
        permit.release()
        raise
    release_when_done(permit, submission.started)
    queued = submission.queued.id if submission.queued else None
    return turn_frames(sub, submission.started, live, queued_id=queued)


async def _follow(frames: Frames, progress: Progress) -> Answer:
    answer = Answer()
    card: WaitingCard | None = None
    async with aclosing(frames):
        async for frame in frames:
            match frame:
                case TextDeltaFrame(text=text) if text:
                    await progress(text)
                case MessageCommitted(message=row) if row.role == "assistant" and not row.hidden:
                    answer.texts.append(row.text)
                case ApprovalRequested() as asked:
                    waiting = WaitingApproval(asked.approval_id, asked.tool_use_id, asked.tool,
                                              asked.input, asked.risk, asked.family)  # fmt: skip
                    return _waits(answer, waiting, "paused")
                case InputRequested(tool_use_id=use_id, name=name, input=given):
                    card = WaitingCard(use_id, name, given)
                case TurnFinished(stop_reason=reason, error=error):
                    if reason == "paused" and card is not None:
                        return _waits(answer, card, reason)
                    answer.result["stop_reason"] = reason
                    if error:
                        answer.texts.append(f"The turn ended {reason}: {error}")
                    return answer
                case ErrorFrame(message=message):
                    answer.texts.append(message)
                    answer.result["stop_reason"] = "interrupted"
                    return answer
    return answer


def _waits(answer: Answer, waiting: WaitingApproval | WaitingCard, reason: str) -> Answer:
    answer.waiting = waiting
    answer.texts.append(describe(waiting))
    answer.result["stop_reason"] = reason
    if isinstance(waiting, WaitingApproval):
        answer.result["waiting"] = {"approval": {"id": waiting.approval_id,
                                                 "tool": waiting.tool, "input": waiting.input,
                                                 "risk": waiting.risk}}  # fmt: skip
    else:
        card = {"toolCallId": waiting.tool_use_id, "name": waiting.name, "input": waiting.input}
        answer.result["waiting"] = {"card": card}
    return answer
