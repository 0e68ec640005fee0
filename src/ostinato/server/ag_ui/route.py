"""``POST /v1/ag-ui`` (the default agent) and ``POST /v1/ag-ui/{agent}``: AG-UI's
``RunAgentInput`` in, the run's events out as Server-Sent Events (``translate``).

- ``threadId`` is the conversation's id: one of the caller's conversations continues it;
  an id no conversation has starts a new one with that id (1 to 64 letters, digits,
  ``_`` or ``-``), owned by the caller, its earlier messages' text stored first; another
  owner's is a 404.
- The stored history is the truth: a run without ``resume`` sends the last message's
  text, which must be the user's, as a new message (one run at a time in a thread: a
  409 while one runs).
- ``resume`` answers the interrupt the previous run ended on: an approval (``payload``
  ``{"approved": true|false, "remember": "exact"|"family"}``; ``status: cancelled``
  declines it) or a question card (``{"answer": ...}``, or ``{"id": ...}`` for
  ``choose``; ``cancelled`` dismisses it); the run follows what goes on.
- ``context``, ``forwardedProps`` and ``state`` are accepted and not used; front-end
  ``tools`` are refused (400): the agent's own tools run on the server.

A client that goes away mid-run cancels its turn.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ostinato.answers import Waiting, WaitingApproval, WaitingCard
from ostinato.bus import Subscription
from ostinato.errors import Conflict, InvalidRequest, NotFound
from ostinato.frames import Frame, TurnFinished
from ostinato.messages import Message, TextBlock
from ostinato.server.ag_ui.translate import RunEvents
from ostinato.server.auth import Caller, CurrentCaller
from ostinato.server.context import Context, ServerContext
from ostinato.server.routes.turns import cancel_when_begun, release_when_done
from ostinato.server.schemas import CONFLICT, ERROR_RESPONSES
from ostinato.server.sse import FrameStream
from ostinato.server.streams import Live, run_frames, turn_frames
from ostinato.server.waiting import what_waits
from ostinato.store.base import AppendMessage, Conversation, CreateConversation, utcnow
from ostinato.submissions import TurnHandle

router = APIRouter(tags=["ag-ui"])
THREAD_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
Frames = AsyncGenerator[Frame | None, None]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Said(_Open):
    id: str = ""
    role: str
    content: Any = None

    @property
    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        if isinstance(self.content, list):
            parts = [p for p in self.content if isinstance(p, dict) and p.get("type") == "text"]
            return "".join(str(p.get("text", "")) for p in parts)
        return ""


class Resume(_Open):
    interruptId: str
    status: str = "resolved"
    payload: Any = None


class RunInput(_Open):
    threadId: str
    runId: str
    messages: list[Said] = Field(default_factory=list)
    tools: list[dict[str, Any]] | None = None
    context: list[dict[str, Any]] | None = None
    resume: list[Resume] | None = None


_BODY = {
    "type": "object",
    "required": ["threadId", "runId", "messages"],
    "properties": {
        "threadId": {"type": "string", "pattern": THREAD_ID.pattern},
        "runId": {"type": "string"},
        "messages": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["role"],
                "properties": {"id": {"type": "string"}, "role": {"type": "string"}},
            },
        },
        "tools": {"type": "array", "maxItems": 0, "items": {"type": "object"}},
        "context": {"type": "array", "items": {"type": "object"}},
        "resume": {"type": "array", "items": {"type": "object", "required": ["interruptId"]}},
    },
}
RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The run's AG-UI events.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
    400: ERROR_RESPONSES[422] | {"description": "Front-end tools, which are not supported."},
    **ERROR_RESPONSES,
    **CONFLICT,
    429: ERROR_RESPONSES[422] | {"description": "Over a limit; see Retry-After."},
}
OPENAPI = {"requestBody": {"required": True, "content": {"application/json": {"schema": _BODY}}}}


class ToolsNotSupported(InvalidRequest):
    status = 400
    code = "tools_not_supported"


@router.post("/v1/ag-ui", responses=RESPONSES, openapi_extra=OPENAPI)
async def default_run(context: Context, caller: CurrentCaller, request: Request) -> Response:
    """An AG-UI run of the default agent (docs/clients.md)."""
    return await _run(context, caller, request, None)


@router.post("/v1/ag-ui/{agent}", responses=RESPONSES, openapi_extra=OPENAPI)
async def agent_run(
    context: Context, caller: CurrentCaller, request: Request, agent: str
) -> Response:
    """An AG-UI run of one agent (docs/clients.md)."""
    if context.runtime.router.get(agent) is None:
        raise NotFound(f"no agent named {agent!r}")
    return await _run(context, caller, request, agent)


def read_input(raw: bytes) -> RunInput:
    try:
        body = RunInput.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise InvalidRequest(f"{where}: {first['msg']}") from None
    if not THREAD_ID.match(body.threadId):
        raise InvalidRequest("threadId must be 1 to 64 letters, digits, '_' or '-'")
    if body.tools:
        raise ToolsNotSupported(
            "front-end tools are not supported: the agent's own tools run on the server"
        )
    return body


async def _run(
    context: ServerContext, caller: Caller, request: Request, agent: str | None
) -> Response:
    body = read_input(await request.body())
    cid = await _thread(context, caller, body)
    async with context.watch(caller, cid) as watched:
        subscription, live = watched.subscription, watched.live
        frames, on_abandon = await _act(context, caller, cid, agent, body, subscription, live)
    events = RunEvents(body.threadId, body.runId)
    state: dict[str, Any] = {"conversationId": cid, "running": {}, "waiting": None}
    stream = FrameStream(_sse(frames, events, state), on_close=watched.close, on_abandon=on_abandon)
    stream.headers["x-ostinato-conversation-id"] = cid
    return stream


async def _thread(context: ServerContext, caller: Caller, body: RunInput) -> str:
    """The thread's conversation: the caller's, or a new one with the thread's id."""
    runtime = context.runtime
    found = await runtime.store.get_conversation(body.threadId)
    if found is not None:
        if not caller.owns(found):
            raise NotFound(f"no conversation with id {body.threadId!r}")
        return found.id
    now = utcnow()
    conversation = Conversation(
        body.threadId, "idle", now, now, owner=caller.owner, metadata={"surface": "ag-ui"}
    )
    earlier = [m for m in body.messages[:-1] if m.role in ("user", "assistant") and m.text]
    history = [
        AppendMessage(body.threadId, Message(m.role, (TextBlock(m.text),)))  # type: ignore[arg-type]
        for m in earlier
    ]
    await runtime.store.write(CreateConversation(conversation), *history)
    return body.threadId


async def _act(
    context: ServerContext,
    caller: Caller,
    cid: str,
    agent: str | None,
    body: RunInput,
    subscription: Subscription,
    live: Live,
) -> tuple[Frames, Callable[[], None]]:
    """Resume what waits, or send the last message; the frames of the turn that follows."""
    if body.resume:
        return await _resume(context, cid, body.resume, subscription, live)
    last = body.messages[-1] if body.messages else None
    if last is None or last.role != "user" or not last.text.strip():
        raise InvalidRequest("the last message must be the user's, with text (or send resume)")
    runtime = context.runtime
    permit = await context.owner_limits.begin_turn(caller.owner)
    try:
        submission = await runtime.submit(
            cid, last.text, policy="reject", skill=agent, client_message_id=last.id or None,
        )  # fmt: skip
        await submission.handle()
    except Conflict:
        permit.release()
        raise Conflict("a run is going on in this thread; wait for it to end") from None
    except BaseException:
        permit.release()
        raise
    release_when_done(permit, submission.started)
    frames = turn_frames(subscription, submission.started, live)
    return frames, cancel_when_begun(submission.started)


async def _resume(
    context: ServerContext, cid: str, entries: list[Resume], subscription: Subscription, live: Live
) -> tuple[Frames, Callable[[], None]]:
    runtime = context.runtime
    waiting = await what_waits(runtime, cid)
    entry = next(
        (e for e in entries if waiting is not None and e.interruptId == _id(waiting)), None
    )
    if entry is None or waiting is None:
        raise Conflict("no interrupt of this thread waits with the id resume names")
    if isinstance(waiting, WaitingApproval):
        approve, remember = _decision(entry)
        await runtime.decide(cid, waiting.approval_id, approve=approve, remember=remember)
        handle = runtime.running(cid)
        return run_frames(subscription, live), _cancel(handle)
    if entry.status == "cancelled":  # dismissed: nothing goes on, the run ends cancelled
        await runtime.cancel(cid)
        return _dismissed(), lambda: None
    answered = await runtime.answer_card(cid, waiting.tool_use_id, _answer(waiting, entry))
    started: asyncio.Future[TurnHandle] = asyncio.get_running_loop().create_future()
    started.set_result(answered)
    return turn_frames(subscription, started, live), cancel_when_begun(started)


async def _dismissed() -> Frames:
    yield TurnFinished(run_id="", seq=0, turn_id="", stop_reason="cancelled", state="idle")


def _id(waiting: Waiting) -> str:
    return waiting.approval_id if isinstance(waiting, WaitingApproval) else waiting.tool_use_id


def _decision(entry: Resume) -> tuple[bool, Any]:
    if entry.status == "cancelled":
        return False, "none"
    payload = entry.payload
    if isinstance(payload, bool):
        return payload, "none"
    if isinstance(payload, dict) and isinstance(payload.get("approved"), bool):
        remember = payload.get("remember", "none")
        if remember not in ("none", "exact", "family"):
            raise InvalidRequest("resume payload.remember is none, exact or family")
        return payload["approved"], remember
    raise InvalidRequest('an approval is resumed with payload {"approved": true or false}')


def _answer(card: WaitingCard, entry: Resume) -> Any:
    payload = entry.payload
    if card.name == "choose" and isinstance(payload, dict):
        return payload
    if isinstance(payload, dict) and "answer" in payload:
        return payload["answer"]
    if isinstance(payload, str | list):
        return payload
    raise InvalidRequest('a question is resumed with payload {"answer": ...}')


def _cancel(handle: TurnHandle | None) -> Callable[[], None]:
    def cancel() -> None:
        if handle is not None and not handle.task.done():
            handle.task.cancel()

    return cancel


async def _sse(frames: Frames, events: RunEvents, state: dict[str, Any]) -> AsyncIterator[bytes]:
    for event in events.start(state):
        yield _encode(event)
    async with aclosing(frames):
        async for frame in frames:
            if frame is None:
                yield b": ping\n\n"
                continue
            for event in events.see(frame):
                yield _encode(event)
            if events.done:
                return


def _encode(event: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(event, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()
