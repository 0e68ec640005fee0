"""What a ``POST /v1/responses`` does: which conversation it continues, and what it
starts there.

The conversation, first found wins:

1. ``previous_response_id``: that response's conversation. From its newest response the
   conversation goes on as it is (rows written since by other surfaces are simply part
   of the history); from an earlier one the new message forks the conversation's tree
   after that response's last row (``ostinato.branching``: its turn moves the branch
   there first), so the answer follows that response and the later ones stay on their
   own branch. A fork takes one new user message (no earlier messages, no answers to
   what waits on the other branch) and a response whose turn still runs is a 409;
2. ``conversation`` (an id, or ``{"id": ...}``): one of the caller's conversations;
3. the approvals an ``mcp_approval_response`` answers: their conversation (a client that
   sends its whole history back, without ``previous_response_id``, answers this way);
4. a new conversation, owned by the caller, holding the input's earlier messages.

Another owner's response, conversation or approval is a 404, as a missing one is.

What it starts, from the input's last items: approval answers decide their approvals
(the turn that waits goes on); otherwise the newest user message is read against what
waits (``ostinato.answers``: ``yes`` / ``no`` answer an approval, an option answers a
question card) and else becomes a new message, queued behind a running turn, with the
response's id as its ``client_message_id``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field

from ostinato.answers import AnswerCard, Decide, interpret
from ostinato.approvals import Approval
from ostinato.branching import FORK_AT
from ostinato.bus import Subscription
from ostinato.errors import Conflict, NotFound
from ostinato.frames import Frame
from ostinato.messages import Message, TextBlock
from ostinato.models.base import Model
from ostinato.server.auth import Caller, owned
from ostinato.server.context import ServerContext
from ostinato.server.responses.events import approval_of_item
from ostinato.server.responses.record import latest_of, owned_response, snapshot
from ostinato.server.responses.steps import Call
from ostinato.server.responses.wire import Input, ResponseRequest, ResponsesError, Said, bad
from ostinato.server.routes.turns import cancel_when_begun, release_when_done
from ostinato.server.streams import Live, run_frames, turn_frames
from ostinato.server.waiting import what_waits
from ostinato.store.base import AppendMessage
from ostinato.submissions import TurnHandle

Frames = asyncio.Future[TurnHandle]


@dataclass(slots=True)
class Plan:
    """What the request will do, decided before anything is stored."""

    cid: str
    text: str | None = None  # a new message
    fork_at: int | None = None  # the row the new message's turn moves the branch to first
    decide: list[tuple[Approval, bool]] = field(default_factory=list)
    card: AnswerCard | None = None

    @property
    def answers(self) -> list[Approval]:
        return [approval for approval, _ in self.decide]


@dataclass(slots=True)
class Started:
    """What the request started: the frames to follow, how to stop them, and whether
    its message waits behind another turn."""

    frames: AsyncGenerator[Frame | None, None]
    on_abandon: Callable[[], None]
    queued: bool = False
    calls: dict[str, Call] = field(default_factory=dict)


async def conversation_for(
    context: ServerContext, caller: Caller, body: ResponseRequest, given: Input
) -> str:
    """The conversation the request continues (see the module's docstring), or a new
    one holding the input's earlier messages."""
    store = context.runtime.store
    if body.previous_response_id:
        previous = await owned_response(store, caller, body.previous_response_id)
        return previous.conversation_id
    named = body.conversation_id
    if named is not None:
        return (await owned(context.runtime, caller, named)).id
    if given.answers:
        approval = await _approval(context, caller, given.answers[0].approval_item, None)
        return approval.conversation_id
    talk = given.talk
    title = " ".join(talk[-1].text.split())[:80] if talk else None
    conversation = await context.runtime.create_conversation(
        owner=caller.owner, title=title or None, metadata={"surface": "responses"}
    )
    await store_history(context, conversation.id, talk[:-1])
    return conversation.id


async def store_history(context: ServerContext, cid: str, said: list[Said]) -> None:
    rows = [
        AppendMessage(cid, Message(s.role, (TextBlock(s.text),))) for s in said if s.text.strip()
    ]
    if rows:
        await context.runtime.store.write(*rows)


async def _approval(
    context: ServerContext, caller: Caller, item_id: str, cid: str | None
) -> Approval:
    approval_id = approval_of_item(item_id)
    found = await context.runtime.store.get_approval(approval_id) if "\x00" not in item_id else None
    if found is not None and (cid is None or found.conversation_id == cid):
        try:
            await owned(context.runtime, caller, found.conversation_id)
            return found
        except NotFound:
            pass
    raise ResponsesError(
        404, f"no approval request with id {item_id!r}", param="input", code="not_found"
    )


async def plan(
    context: ServerContext, caller: Caller, cid: str, body: ResponseRequest, given: Input
) -> Plan:
    """What the request does in conversation ``cid`` (nothing is stored yet, but the
    input's earlier messages of a continued conversation)."""
    if given.answers:
        decided = [
            (await _approval(context, caller, a.approval_item, cid), a.approve)
            for a in given.answers
        ]
        return Plan(cid, decide=decided)
    talk = given.talk
    if not talk or talk[-1].role != "user" or not talk[-1].text.strip():
        raise bad("the last input message must be the user's, with text", "input")
    fork_at = await fork_point(context, caller, body)
    if fork_at is not None:
        if len(talk) > 1:
            raise bad(
                "a response from an earlier response (a fork) takes one new user message",
                "input",
            )
        return Plan(cid, text=talk[-1].text, fork_at=fork_at)
    if body.previous_response_id or body.conversation is not None:
        await store_history(context, cid, talk[:-1])
    text = talk[-1].text
    reading = interpret(text, await what_waits(context.runtime, cid))
    if isinstance(reading, Decide):
        found = await context.runtime.store.get_approval(reading.approval_id)
        assert found is not None
        return Plan(cid, decide=[(found, reading.approve)])
    if isinstance(reading, AnswerCard):
        return Plan(cid, card=reading)
    return Plan(cid, text=text)


async def fork_point(context: ServerContext, caller: Caller, body: ResponseRequest) -> int | None:
    """The row a new message forks the conversation after: the last row of
    ``previous_response_id`` when that is not its conversation's newest response."""
    if not body.previous_response_id:
        return None
    store = context.runtime.store
    previous = await owned_response(store, caller, body.previous_response_id)
    if await latest_of(store, previous.conversation_id) == previous.id:
        return None
    taken = await snapshot(store, previous)
    if taken.turn is None or taken.turn.status == "running" or not taken.rows:
        raise ResponsesError(
            409,
            f"response {previous.id!r} has not finished: a new response can follow it once it has",
            param="previous_response_id",
            code="response_running",
        )
    return taken.rows[-1].seq


async def start(
    context: ServerContext,
    caller: Caller,
    step: Plan,
    *,
    message_id: str,
    model: Model | None,
    skill: str | None,
    instructions: str | None,
    subscription: Subscription,
    live: Live,
) -> Started:
    """Do what ``step`` says; the frames of the turn that follows."""
    runtime = context.runtime
    if step.decide:
        for approval, approve in step.decide:
            await runtime.decide(step.cid, approval.id, approve=approve)
        turn_id = step.decide[0][0].turn_id
        calls = {
            c.id: (c.name, c.input)
            for c in await runtime.store.list_tool_calls(step.cid, turn_id=turn_id)
        }
        return Started(
            run_frames(subscription, live), _cancel_running(context, step.cid), calls=calls
        )
    if step.card is not None:
        handle = await runtime.answer_card(step.cid, step.card.tool_use_id, step.card.result)
        began: Frames = asyncio.get_running_loop().create_future()
        began.set_result(handle)
        return Started(turn_frames(subscription, began, live), cancel_when_begun(began))
    assert step.text is not None
    permit = await context.owner_limits.begin_turn(caller.owner)
    try:
        asked = Message("user", (TextBlock(step.text),))
        if step.fork_at is not None:
            asked = Message("user", asked.blocks, metadata={FORK_AT: step.fork_at})
        submission = await runtime.submit(
            step.cid,
            asked,
            client_message_id=message_id,
            model=model,
            skill=skill,
            instructions=instructions,
        )
        if submission.queued is None:
            await submission.handle()
    except BaseException:
        permit.release()
        raise
    release_when_done(permit, submission.started)
    queued = submission.queued.id if submission.queued else None
    frames = turn_frames(subscription, submission.started, live, queued_id=queued)
    return Started(frames, cancel_when_begun(submission.started), queued=queued is not None)


def _cancel_running(context: ServerContext, cid: str) -> Callable[[], None]:
    handle = context.runtime.running(cid)

    def cancel() -> None:
        if handle is not None and not handle.task.done():
            handle.task.cancel()

    return cancel


def refused_conflict(error: Conflict) -> ResponsesError:
    return ResponsesError(409, error.message, code=error.code)


__all__ = ["Frame", "Plan", "Started", "conversation_for", "plan", "start"]
