"""``POST /v1/ai-sdk/chat``: the route the AI SDK's ``useChat`` (its default HTTP
transport) can point at.

The body is what the transport sends: ``id`` (the chat), ``messages`` (UI messages),
``trigger`` (``submit-message`` or ``regenerate-message``), ``messageId``. The chat id is
the conversation's: one of the caller's conversations, or, when no conversation has that
id, a new one the caller then owns (its earlier UI messages' text stored first); another
owner's is a 404. The stored history is the truth: what the request adds is read from
its last message:

- an assistant message whose tool part carries an approval answer
  (``addToolApprovalResponse``: state ``approval-responded``) decides that approval;
- an assistant message whose tool part has an output for the card that waits
  (``addToolOutput``: state ``output-available``) answers the card;
- a user message: its text is a new message (or, as on the OpenAI-compatible endpoint,
  ``yes`` / ``no`` / an option answers what waits; ``ostinato.answers``);
- ``regenerate-message`` (``regenerate()``): a new answer in place of the stored one, and
  a ``submit-message`` whose ``messageId`` is its last (user) message (``sendMessage({text,
  messageId})``): a new version of that stored message; each on a new branch (``tree``).

The answer is the UI message stream (``translate``) as Server-Sent Events with the
``x-vercel-ai-ui-message-stream: v1`` header, ending with ``data: [DONE]``. A client that
goes away mid-stream cancels its turn. Errors before the stream starts are the API's JSON
errors (useChat shows their text).
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ostinato.answers import AnswerCard, Decide, WaitingApproval, WaitingCard, interpret
from ostinato.background.stage_one import BACKGROUND_SUFFIX, is_reserved
from ostinato.bus import Subscription
from ostinato.errors import Conflict, InvalidRequest, NotFound
from ostinato.frames import Frame
from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock
from ostinato.server.ai_sdk.translate import UIStream
from ostinato.server.ai_sdk.tree import moves_tree, tree_turn
from ostinato.server.auth import Caller, CurrentCaller
from ostinato.server.context import Context, ServerContext
from ostinato.server.routes.turns import cancel_when_begun, release_when_done
from ostinato.server.schemas import CONFLICT, ERROR_RESPONSES
from ostinato.server.sse import FrameStream
from ostinato.server.streams import Live, Watched, run_frames, turn_frames
from ostinato.server.waiting import what_waits
from ostinato.store.base import AppendMessage, Conversation, CreateConversation, utcnow
from ostinato.submissions import TurnHandle

router = APIRouter(tags=["ai-sdk"])
HEADERS = {"x-vercel-ai-ui-message-stream": "v1"}
CHAT_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
Frames = AsyncGenerator[Frame | None, None]


class UIMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str = ""
    role: str
    parts: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(str(p.get("text", "")) for p in self.parts if p.get("type") == "text")


class ChatBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    messages: list[UIMessage] = Field(min_length=1)
    trigger: str = "submit-message"
    messageId: str | None = None
    include_hidden: bool = False  # the turn's hidden lookups too (the transport's `body`)


_BODY = {
    "type": "object",
    "required": ["id", "messages"],
    "properties": {
        "id": {"type": "string", "pattern": CHAT_ID.pattern},
        "messages": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["role"],
                "properties": {
                    "id": {"type": "string"},
                    "role": {"type": "string"},
                    "parts": {"type": "array", "items": {"type": "object"}},
                },
            },
        },
        "trigger": {"type": "string"},
        "messageId": {"type": ["string", "null"]},
        "include_hidden": {
            "type": "boolean",
            "description": "Stream the turn's hidden lookups (its memory recall) too.",
        },
    },
}


@router.post(
    "/v1/ai-sdk/chat",
    responses={
        200: {
            "description": "The turn as the AI SDK's UI message stream.",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        **ERROR_RESPONSES,
        **CONFLICT,
        429: ERROR_RESPONSES[422] | {"description": "Over a limit; see Retry-After."},
    },
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": _BODY}}}
    },
)
async def ai_sdk_chat(context: Context, caller: CurrentCaller, request: Request) -> Response:
    """The AI SDK's chat request, answered with its UI message stream (docs/clients.md)."""
    body = _read(await request.body())
    cid = await _conversation(context, caller, body)
    async with context.watch(caller, cid) as watched:
        frames, on_abandon = await _act(context, caller, cid, body, watched)
    stream = UIStream(
        context.surfaces.filters("ai_sdk"),
        _message_id(body, cid),
        {"conversationId": cid},
        include_hidden=body.include_hidden,
    )
    response = FrameStream(_chunks(frames, stream), on_close=watched.close, on_abandon=on_abandon)
    response.headers.update(HEADERS)
    response.headers["x-ostinato-conversation-id"] = cid
    return response


def _message_id(body: ChatBody, cid: str) -> str:
    """The answer's message id: the assistant message a request continues keeps its id
    (an answered approval or card), a new answer gets one of its own."""
    last = body.messages[-1]
    if last.role == "assistant" and last.id:
        return last.id
    if moves_tree(body.trigger, body.messageId, last):
        return f"msg-{new_id()}"  # a new answer, not the edited message's id
    return body.messageId or f"msg-{cid}-{len(body.messages)}"


def _read(raw: bytes) -> ChatBody:
    try:
        body = ChatBody.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise InvalidRequest(f"{where}: {first['msg']}") from None
    if not CHAT_ID.match(body.id):
        raise InvalidRequest("id must be 1 to 64 letters, digits, '_' or '-'")
    if body.trigger not in ("submit-message", "regenerate-message"):
        raise InvalidRequest(f"trigger {body.trigger!r} is not supported")
    return body


async def _conversation(context: ServerContext, caller: Caller, body: ChatBody) -> str:
    """The chat's conversation: the caller's, or a new one with the chat's id."""
    runtime = context.runtime
    found = await runtime.store.get_conversation(body.id)
    if found is not None:
        if not caller.owns(found):
            raise NotFound(f"no conversation with id {body.id!r}")
        return found.id
    if is_reserved(body.id):
        raise InvalidRequest(f"ids ending {BACKGROUND_SUFFIX!r} are reserved for the server")
    now = utcnow()
    title = " ".join(body.messages[-1].text.split())[:80] or None
    conversation = Conversation(
        body.id, "idle", now, now, owner=caller.owner, title=title, metadata={"surface": "ai-sdk"}
    )
    history = [
        AppendMessage(body.id, Message(m.role, (TextBlock(m.text),)))  # type: ignore[arg-type]
        for m in body.messages[:-1]
        if m.role in ("user", "assistant") and m.text.strip()
    ]
    await runtime.store.write(CreateConversation(conversation), *history)
    return body.id


async def _act(
    context: ServerContext,
    caller: Caller,
    cid: str,
    body: ChatBody,
    watched: Watched,
) -> tuple[Frames, Any]:
    """Do what the request's last message asks, and follow the turn that follows."""
    runtime = context.runtime
    subscription, live = watched.subscription, watched.live
    waiting = await what_waits(runtime, cid)
    last = body.messages[-1]
    if last.role == "assistant":
        return await _tool_answer(context, cid, last, waiting, subscription, live)
    if moves_tree(body.trigger, body.messageId, last):
        start = functools.partial(tree_turn, runtime, cid, body.messages)
    else:
        if last.role != "user":
            users = [m for m in body.messages if m.role == "user" and m.text.strip()]
            if not users:
                raise InvalidRequest("there is no user message to send")
            last = users[-1]
        if not last.text.strip():
            raise InvalidRequest("the last message has no text")
        reading = interpret(last.text, waiting)
        if isinstance(reading, Decide | AnswerCard):
            return await _answered(context, cid, reading, subscription, live)
        start = functools.partial(runtime.submit, cid, last.text, client_message_id=last.id or None)
    permit = await context.owner_limits.begin_turn(caller.owner)
    try:
        submission = await start()
        if submission.queued is None:
            await submission.handle()
    except BaseException:
        permit.release()
        raise
    release_when_done(permit, submission.started)
    queued = submission.queued.id if submission.queued else None
    frames = turn_frames(subscription, submission.started, live, queued_id=queued)
    return frames, cancel_when_begun(submission.started)


async def _tool_answer(
    context: ServerContext,
    cid: str,
    message: UIMessage,
    waiting: WaitingApproval | WaitingCard | None,
    subscription: Subscription,
    live: Live,
) -> tuple[Frames, Any]:
    """An assistant message sent back with an approval answered or a card's output."""
    for part in reversed(message.parts):
        approval = part.get("approval")
        if part.get("state") == "approval-responded" and isinstance(approval, dict):
            approve = bool(approval.get("approved"))
            decide = Decide(str(approval.get("id")), approve)
            return await _answered(context, cid, decide, subscription, live)
        if (
            isinstance(waiting, WaitingCard)
            and part.get("toolCallId") == waiting.tool_use_id
            and part.get("state") == "output-available"
        ):
            answer = AnswerCard(waiting.tool_use_id, part.get("output"))
            return await _answered(context, cid, answer, subscription, live)
    raise Conflict("the last message answers nothing that waits in this conversation")


async def _answered(
    context: ServerContext,
    cid: str,
    reading: Decide | AnswerCard,
    subscription: Subscription,
    live: Live,
) -> tuple[Frames, Any]:
    runtime = context.runtime
    if isinstance(reading, Decide):
        remember = reading.remember
        await runtime.decide(cid, reading.approval_id, approve=reading.approve, remember=remember)
        handle = runtime.running(cid)
        return run_frames(subscription, live), _cancel(handle)
    answered = await runtime.answer_card(cid, reading.tool_use_id, reading.result)
    started: asyncio.Future[TurnHandle] = asyncio.get_running_loop().create_future()
    started.set_result(answered)
    return turn_frames(subscription, started, live), cancel_when_begun(started)


def _cancel(handle: TurnHandle | None) -> Any:
    def cancel() -> None:
        if handle is not None and not handle.task.done():
            handle.task.cancel()

    return cancel


async def _chunks(frames: Frames, stream: UIStream) -> AsyncIterator[bytes]:
    for chunk in stream.start():
        yield _sse(chunk)
    async with aclosing(frames):
        async for frame in frames:
            if frame is None:
                yield b": ping\n\n"
                continue
            for chunk in stream.see(frame):
                yield _sse(chunk)
            if stream.done:
                break
    yield b"data: [DONE]\n\n"


def _sse(chunk: Any) -> bytes:
    return f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n".encode()
