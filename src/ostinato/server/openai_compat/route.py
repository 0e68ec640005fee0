"""``POST /v1/chat/completions``: an agent behind OpenAI's Chat Completions protocol.

``model`` names the agent: ``ostinato`` (the default agent), a skill's id or persona, or a
tier or ``provider:model`` id that ``/v1/models`` lists (the default agent answering with
that model). The request's newest user message becomes a turn of the conversation the
request names (``continuity``); what it means depends on what waits (``ostinato.answers``:
``yes`` approves a waiting call, an option answers a card, anything else is a new
message). The turn's frames are translated (``translate``) into one completion, streamed
or not. Every answer carries ``X-Ostinato-Conversation-Id``.

A streamed completion whose client goes away cancels its turn (the provider call is
closed; what was already written is kept, and the turn ends ``cancelled``). A completion
ends early, its turn still waiting, when a tool call asks for approval.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from ostinato.answers import AnswerCard, Decide, interpret
from ostinato.bus import Subscription
from ostinato.errors import ClientError
from ostinato.frames import Frame
from ostinato.models.base import Model
from ostinato.runtime import Runtime
from ostinato.server.auth import Caller, CurrentCaller
from ostinato.server.context import Context, ServerContext
from ostinato.server.openai_compat.chunks import Chunks
from ostinato.server.openai_compat.continuity import conversation_for, edited_row
from ostinato.server.openai_compat.translate import Content, Failed, Finish, Reasoning, Reply
from ostinato.server.openai_compat.wire import (
    CONVERSATION_HEADER,
    DEFAULT_AGENT,
    PROGRESS_HEADER,
    ChatRequest,
    CompletionError,
    Envelope,
    Said,
    split_messages,
)
from ostinato.server.routes.turns import cancel_when_begun, release_when_done
from ostinato.server.sse import FrameStream
from ostinato.server.streams import Live, run_frames, turn_frames
from ostinato.server.waiting import what_waits
from ostinato.submissions import Submission, TurnHandle

router = APIRouter(tags=["openai"])
Frames = AsyncGenerator[Frame | None, None]


@dataclass(slots=True)
class Target:
    """Who answers: the agent (``None``: the router's pick, the default agent) and the
    model (``None``: the agent's own)."""

    skill: str | None = None
    model: Model | None = None


@dataclass(frozen=True, slots=True)
class Run:
    """What a completion follows: the turn's frames, and how to cancel that turn."""

    frames: Frames
    on_abandon: Callable[[], None]


@router.post(
    "/v1/chat/completions",
    responses={
        200: {
            "description": "A `chat.completion`, or with `stream: true` its "
            "`chat.completion.chunk` events then `data: [DONE]`.",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        400: {"description": "A bad request, client-supplied tools, or a bad model header."},
        403: {"description": "A model callers may not choose here (`model_not_allowed`)."},
        404: {"description": "An unknown model (agent) or conversation."},
        429: {"description": "Over a limit; see Retry-After."},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "required": ["messages"],
                        "properties": {
                            "model": {"type": "string"},
                            "messages": {"type": "array", "items": {"type": "object"}},
                            "stream": {"type": "boolean"},
                        },
                    }
                }
            },
        }
    },
)
async def chat_completions(context: Context, caller: CurrentCaller, request: Request) -> Response:
    """OpenAI's Chat Completions, answered by an agent (see docs/clients.md)."""
    headers: dict[str, str] = {}
    try:
        return await _complete(context, caller, request, headers)
    except CompletionError as error:
        return error.response(headers)
    except ClientError as error:
        retry_after = getattr(error, "retry_after", None)  # a limit's 429
        if retry_after is not None:
            headers["retry-after"] = str(retry_after)
        return CompletionError.of(error).response(headers)


async def _complete(
    context: ServerContext, caller: Caller, request: Request, headers: dict[str, str]
) -> Response:
    body = ChatRequest.read(await request.body())
    target = _target(context, request, body.model)
    history, newest, system = split_messages(body)
    runtime = context.runtime
    cid = await conversation_for(runtime, caller, request.headers, body, history, newest)
    edits = await edited_row(runtime, cid, history)
    headers[CONVERSATION_HEADER] = cid
    settings = context.surfaces.of(target.skill)
    progress = request.headers.get(PROGRESS_HEADER.lower(), "").lower()
    reply = Reply(
        settings.filters_for("openai"),
        for_agent=context.surfaces.filters("openai"),
        progress=progress in ("1", "true", "yes") or (settings.progress and progress == ""),
    )
    envelope = Envelope.new(
        uuid.uuid4().hex,
        body.model,
        bool(body.stream_options and body.stream_options.include_usage),
    )
    ticket = await context.streams.open(caller) if body.stream else None
    subscription = runtime.bus.subscribe(cid)

    def close() -> None:
        subscription.close()
        if ticket is not None:
            context.streams.close(ticket)

    try:
        live = context.live_for(ticket) if ticket is not None else context.live
        run = await _start(
            context, caller, cid, (newest, edits), system, target, subscription, live
        )
    except BaseException:
        close()
        raise
    if body.stream:
        stream = FrameStream(
            _chunks(run.frames, Chunks(reply, envelope)), on_close=close, on_abandon=run.on_abandon
        )
        stream.headers.update(headers)
        return stream
    try:
        return await _collect(run.frames, reply, envelope, headers)
    finally:
        close()


def _target(context: ServerContext, request: Request, name: str) -> Target:
    """The agent ``model`` names; a listed model id or tier is the default agent with that
    model. A model header (``x-ostinato-model-id``) wins over either."""
    router = context.runtime.router
    chosen = context.model_for(request)
    if name.strip().lower() == DEFAULT_AGENT:
        return Target(None, chosen)
    skill = router.get(name.strip())
    if skill is not None:
        return Target(skill.id, chosen)
    if context.resolve_model is not None and name in _listed(context):
        if chosen is None and context.choices is not None and not context.choices.allows(name):
            raise CompletionError(
                403,
                f"callers may not choose the model {name!r} here; choose one of: "
                f"{', '.join(context.choices.names)} (or an agent: {_agents(context)})",
                code="model_not_allowed",
                param="model",
            )
        return Target(None, chosen or context.resolve_model(name))
    raise CompletionError(
        404,
        f"the model {name!r} does not exist: name an agent ({_agents(context)}) or a model "
        "GET /v1/models lists",
        code="model_not_found",
        param="model",
    )


def _agents(context: ServerContext) -> str:
    return ", ".join([DEFAULT_AGENT, *(s.id for s in context.runtime.router.skills)])


def _listed(context: ServerContext) -> set[str]:
    listed = {context.model_name}
    for entry in (context.models or {}).get("data", []):
        listed.add(str(entry.get("id")))
        tier = (entry.get("ostinato") or {}).get("tier")
        if tier:
            listed.add(str(tier))
    return listed


async def _start(
    context: ServerContext,
    caller: Caller,
    cid: str,
    asked: tuple[Said, int | None],
    system: str | None,
    target: Target,
    subscription: Subscription,
    live: Live,
) -> Run:
    """Act on the newest message (decide, answer the card, or send it; or, when it
    ``edits`` a stored row, send it as that row's new version), and follow the turn that
    follows."""
    runtime = context.runtime
    newest, edits = asked
    waits = None if edits is not None else await what_waits(runtime, cid)
    reading = interpret(newest.text, waits)
    if isinstance(reading, Decide):
        await runtime.decide(
            cid, reading.approval_id, approve=reading.approve, remember=reading.remember
        )
        return Run(run_frames(subscription, live), _cancel_running(context, cid))
    if isinstance(reading, AnswerCard):
        handle = await runtime.answer_card(cid, reading.tool_use_id, reading.result)
        started: asyncio.Future[TurnHandle] = asyncio.get_running_loop().create_future()
        started.set_result(handle)
        return Run(turn_frames(subscription, started, live), cancel_when_begun(started))
    permit = await context.owner_limits.begin_turn(caller.owner)
    try:
        submission = await _send(
            runtime,
            cid,
            (newest.text, edits),
            policy=context.surfaces.of(target.skill).policy,
            model=target.model,
            skill=target.skill,
            instructions=system,
        )
        if submission.queued is None:
            await submission.handle()
    except BaseException:
        permit.release()
        raise
    release_when_done(permit, submission.started)
    queued = submission.queued
    frames = turn_frames(
        subscription, submission.started, live, queued_id=queued.id if queued else None
    )
    return Run(frames, cancel_when_begun(submission.started))


async def _send(runtime: Runtime, cid: str, asked: tuple[str, int | None], **kw: Any) -> Submission:
    """Send a message, or (``asked[1]``: the seq it edits) a new version of a stored one."""
    text, edits = asked
    if edits is None:
        return await runtime.submit(cid, text, **kw)
    return await runtime.edit(cid, edits, text, **kw)


def _cancel_running(context: ServerContext, cid: str) -> Callable[[], None]:
    """Cancel the turn that runs now (the one a decision continued), if it still runs."""
    handle = context.runtime.running(cid)

    def cancel() -> None:
        if handle is not None and not handle.task.done():
            handle.task.cancel()

    return cancel


async def _chunks(frames: Frames, chunks: Chunks) -> AsyncIterator[bytes]:
    """The completion's chunk events: the role first, then each piece, then the end."""
    yield chunks.first()
    async with aclosing(frames):
        async for frame in frames:
            if frame is None:
                yield b": ping\n\n"
                continue
            data, ended = chunks.frame(frame)
            if data:
                yield data
            if ended:
                return


async def _collect(
    frames: Frames, reply: Reply, envelope: Envelope, headers: dict[str, str]
) -> Response:
    """The whole completion, once the turn ends (or pauses for a person)."""
    content: list[str] = []
    reasoning: list[str] = []
    async with aclosing(frames):
        async for frame in frames:
            for piece in reply.see(frame) if frame is not None else ():
                match piece:
                    case Content(text=text):
                        content.append(text)
                    case Reasoning(text=text):
                        reasoning.append(text)
                    case Finish(reason=reason, usage=usage):
                        body = envelope.completion(
                            "".join(content), reason, usage, "".join(reasoning) or None
                        )
                        return JSONResponse(body, headers=headers)
                    case Failed(code=code, message=message):
                        error = CompletionError(502, message, code=code)
                        return error.response({**headers, "x-should-retry": "false"})
    error = CompletionError(502, "the turn's stream ended early", code="stream_ended")
    return error.response({**headers, "x-should-retry": "false"})
