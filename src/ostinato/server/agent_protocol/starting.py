"""What a run request starts: a new message in the thread (its input's last human
message; earlier ones are stored first), or a resume (``command: {"resume": value}``)
that answers what waits: an approval (``true`` / ``"yes"`` / ``{"approve": true}``
approve it, anything false declines it) or a question card (an option's text or
number, free text for a question without options, or the card's own answer JSON).

``multitask_strategy`` says what a new message does while a run is going: ``reject``
(409, the default), ``enqueue`` (it waits its turn), ``interrupt`` (the running one is
cancelled); ``rollback`` is refused (it would delete the running run's rows).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ostinato.answers import AnswerCard, WaitingApproval, WaitingCard, interpret
from ostinato.bus import Subscription
from ostinato.errors import Conflict, InvalidRequest
from ostinato.frames import Frame
from ostinato.messages import Message, TextBlock
from ostinato.server.auth import Caller
from ostinato.server.context import ServerContext
from ostinato.server.routes.turns import cancel_when_begun, release_when_done
from ostinato.server.streams import Live, run_frames, turn_frames
from ostinato.server.waiting import what_waits
from ostinato.store.base import AppendMessage
from ostinato.submissions import TurnHandle

POLICIES: dict[str, Literal["queue", "supersede", "reject"]] = {
    "reject": "reject",
    "enqueue": "queue",
    "interrupt": "supersede",
}
REFUSED = {
    "interrupt_before": "interrupt_before is not supported: the agent pauses where a "
    "person is needed (approvals, question cards)",
    "interrupt_after": "interrupt_after is not supported",
    "webhook": "webhooks are not supported",
    "after_seconds": "delayed runs are not supported: use ostinato's schedules",
}
YES = ("yes", "y", "approve", "approved", "true", "ok", "allow")


class RunRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    assistant_id: str
    input: dict[str, Any] | None = None
    command: dict[str, Any] | None = None
    stream_mode: str | list[str] = "values"
    metadata: dict[str, Any] | None = None
    multitask_strategy: str | None = None
    on_disconnect: str | None = None

    def check(self) -> None:
        for name, why in REFUSED.items():
            if (self.model_extra or {}).get(name) not in (None, [], {}):
                raise InvalidRequest(f"{name}: {why}")
        strategy = self.multitask_strategy or "reject"
        if strategy not in POLICIES:
            raise InvalidRequest(
                f"multitask_strategy {strategy!r} is not supported (reject, enqueue, interrupt)"
            )
        extra = set(self.command or {}) - {"resume"}
        if extra:
            raise InvalidRequest(f"command: only resume is supported (not {sorted(extra)})")
        if (self.input is None) == (self.command is None):
            raise InvalidRequest("a run needs input or a command (resume), not both")

    def checkpoint_id(self) -> str | None:
        """The checkpoint the run is to start from, if it names one (``useStream`` names
        the thread's head)."""
        extra = self.model_extra or {}
        named = extra.get("checkpoint_id")
        checkpoint = extra.get("checkpoint")
        if named is None and isinstance(checkpoint, dict):
            named = checkpoint.get("checkpoint_id")
        return None if named is None else str(named)

    @property
    def modes(self) -> list[str]:
        return [self.stream_mode] if isinstance(self.stream_mode, str) else self.stream_mode


@dataclass(slots=True)
class Started:
    frames: AsyncGenerator[Frame | None, None]
    on_abandon: Callable[[], None]
    message_id: str | None = None
    answers: list[str] = field(default_factory=list)


def said(body: RunRequest) -> list[tuple[str, str]]:
    """The input's messages as (role, text); the last must be a human's, with text."""
    raw = (body.input or {}).get("messages")
    if not isinstance(raw, list) or not raw:
        raise InvalidRequest("input.messages must be a non-empty list of messages")
    out = []
    for i, message in enumerate(raw):
        if isinstance(message, str):
            out.append(("user", message))
            continue
        if not isinstance(message, dict):
            raise InvalidRequest(f"input.messages.{i} must be a message object")
        role = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant"}
        kind = role.get(str(message.get("role") or message.get("type")))
        if kind is None:
            raise InvalidRequest(f"input.messages.{i}: only human and ai messages are supported")
        out.append((kind, _text(message.get("content"), i)))
    if out[-1][0] != "user" or not out[-1][1].strip():
        raise InvalidRequest("the last input message must be a human's, with text")
    return out


def _text(content: Any, i: int) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise InvalidRequest(f"input.messages.{i}: only text content is supported")
            parts.append(str(part.get("text", "")))
        return "".join(parts)
    raise InvalidRequest(f"input.messages.{i}.content must be text")


async def start(
    context: ServerContext,
    caller: Caller,
    cid: str,
    body: RunRequest,
    run_id: str,
    subscription: Subscription,
    live: Live,
    after_seq: int,
) -> Started:
    """Start what the run asks (see the module's docstring). A ``checkpoint`` must name
    the thread's newest (``after_seq``): a run continues the thread's linear history."""
    head = body.checkpoint_id()
    if head is not None and head != str(after_seq):
        raise InvalidRequest(
            f"checkpoint {head!r} is not the thread's newest ({after_seq}): a run from an "
            "earlier checkpoint would branch the conversation, which is not supported yet"
        )
    if body.command is not None:
        return await _resume(context, cid, body.command.get("resume"), subscription, live)
    messages = said(body)
    history = [
        AppendMessage(cid, Message(role, (TextBlock(text),)))  # type: ignore[arg-type]
        for role, text in messages[:-1]
        if text.strip()
    ]
    if history:
        await context.runtime.store.write(*history)
    permit = await context.owner_limits.begin_turn(caller.owner)
    try:
        submission = await context.runtime.submit(
            cid,
            messages[-1][1],
            client_message_id=run_id,
            policy=POLICIES[body.multitask_strategy or "reject"],
        )
        if submission.queued is None:
            await submission.handle()
    except BaseException:
        permit.release()
        raise
    release_when_done(permit, submission.started)
    queued = submission.queued.id if submission.queued else None
    frames = turn_frames(subscription, submission.started, live, queued_id=queued)
    return Started(frames, cancel_when_begun(submission.started), message_id=run_id)


async def _resume(
    context: ServerContext, cid: str, value: Any, subscription: Subscription, live: Live
) -> Started:
    runtime = context.runtime
    waiting = await what_waits(runtime, cid)
    if isinstance(waiting, dict):  # pragma: no cover - what_waits never returns one
        raise Conflict("nothing waits")
    if isinstance(value, dict) and waiting is not None and _id(waiting) in value:
        value = value[_id(waiting)]  # {interrupt id: value}
    if isinstance(waiting, WaitingApproval):
        await runtime.decide(cid, waiting.approval_id, approve=_approves(value))
        return Started(
            run_frames(subscription, live), _cancel(context, cid), answers=[waiting.approval_id]
        )
    if isinstance(waiting, WaitingCard):
        result = _card_answer(waiting, value)
        handle = await runtime.answer_card(cid, waiting.tool_use_id, result)
        began: asyncio.Future[TurnHandle] = asyncio.get_running_loop().create_future()
        began.set_result(handle)
        return Started(turn_frames(subscription, began, live), cancel_when_begun(began))
    raise Conflict("nothing waits in this thread: there is no interrupt to resume")


def _id(waiting: WaitingApproval | WaitingCard) -> str:
    return waiting.approval_id if isinstance(waiting, WaitingApproval) else waiting.tool_use_id


def _approves(value: Any) -> bool:
    if isinstance(value, dict):
        value = value.get("approve", value.get("approved", value.get("decision")))
    if isinstance(value, str):
        return value.strip().lower() in YES
    return bool(value)


def _card_answer(card: WaitingCard, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    reading = interpret(value, card)
    if isinstance(reading, AnswerCard):
        return reading.result
    raise InvalidRequest(f"{value!r} answers none of the question's options")


def _cancel(context: ServerContext, cid: str) -> Callable[[], None]:
    handle = context.runtime.running(cid)

    def cancel() -> None:
        if handle is not None and not handle.task.done():
            handle.task.cancel()

    return cancel
