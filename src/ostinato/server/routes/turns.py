"""``POST /v1/conversations/{id}/turns``: send a user message, or answer a question card;
either starts a turn. ``POST /v1/conversations/{id}/cancel``: stop it.

With ``Accept: text/event-stream`` the answer is that turn's frames as Server-Sent Events,
from ``turn.started`` to ``turn.finished``; a message that has to wait behind a running
turn gets its response at once, an ``input.queued`` frame, then its turn's frames when it
begins. Otherwise the turn runs to its end (after waiting its place in the queue) and the
answer is its result as JSON. Either way the turn is a runtime task: a client that goes
away stops receiving, it does not stop the turn, unless it asked for that with
``cancel_on_disconnect``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from functools import partial
from typing import Any

from fastapi import APIRouter, Request, Response

from ostinato.attachments import (
    IMAGE_TYPES,
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_TOTAL_BYTES,
    PDF,
    TEXT_TYPES,
)
from ostinato.bus import Subscription
from ostinato.frames import Frame, InputWaiting
from ostinato.identity.limits import Permit
from ostinato.messages import FileBlock, ImageBlock, Message, TextBlock
from ostinato.models.base import Model
from ostinato.runtime import Runtime
from ostinato.server.auth import Caller, CurrentCaller, owned
from ostinato.server.auth.caller import signed_in
from ostinato.server.context import Context, ServerContext, context_of
from ostinato.server.idempotency import (
    Claimed,
    Earlier,
    IdempotencyKey,
    TurnBegun,
    fingerprint,
    request_key,
)
from ostinato.server.results import finished_result
from ostinato.server.retries import answer_retry
from ostinato.server.schemas import (
    CONFLICT,
    ERROR_RESPONSES,
    MODEL_NOT_ALLOWED,
    NO_NUL,
    NOT_BLANK,
    SSE_RESPONSE,
    CancelOut,
    TurnOut,
    TurnRequest,
)
from ostinato.server.sse import FrameStream, frame_events
from ostinato.server.streams import Live, turn_frames
from ostinato.server.uploads import read_turn_request
from ostinato.store.base import QueuedInput
from ostinato.submissions import Submission, TurnHandle

router = APIRouter(prefix="/v1/conversations", tags=["turns"])

Submit = Callable[..., Awaitable[Submission]]
"""How a turn request is submitted: ``Runtime.submit``'s signature (an edit's binds its row)."""

FILE_TYPES = (*sorted(IMAGE_TYPES), *sorted(TEXT_TYPES), PDF)  # any text/* too

FORM_SCHEMA = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "client_message_id": {"type": "string", "maxLength": 200, "pattern": NO_NUL},
        "policy": {"type": "string", "enum": ["queue", "supersede", "reject", "steer"]},
        "cancel_on_disconnect": {"type": "boolean"},
        "files": {
            "type": "array",
            "items": {"type": "string", "format": "binary"},
            "minItems": 1,
            "maxItems": MAX_FILES,
            "description": f"At most {MAX_FILES} files, {MAX_FILE_BYTES} bytes each and "
            f"{MAX_TOTAL_BYTES} together (larger is a 413).",
        },
    },
    "additionalProperties": False,
    # some text, or files (blank text with files reads "(files attached)")
    "anyOf": [
        {"required": ["text"], "properties": {"text": NOT_BLANK}},
        {"required": ["files"]},
    ],
}


def wants_events(request: Request) -> bool:
    """Whether the Accept header asks for ``text/event-stream``."""
    accept = request.headers.get("accept", "")
    return any(
        part.split(";", 1)[0].strip().lower() == "text/event-stream" for part in accept.split(",")
    )


TURN_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The turn's result, or its frames with Accept: text/event-stream.",
        "content": SSE_RESPONSE,
    },
    413: ERROR_RESPONSES[422]
    | {"description": "The body is over its limit, or a file over the caps."},
    429: ERROR_RESPONSES[422] | {"description": "Over a limit; see Retry-After."},
    **ERROR_RESPONSES,
    **CONFLICT,
    **MODEL_NOT_ALLOWED,
}
TURN_REQUEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/TurnRequest"}},
            "multipart/form-data": {
                "schema": FORM_SCHEMA,
                "encoding": {"files": {"contentType": ", ".join(FILE_TYPES)}},
            },
        },
    }
}


@router.post(
    "/{conversation_id}/turns",
    response_model=TurnOut,
    responses=TURN_RESPONSES,
    openapi_extra=TURN_REQUEST_BODY,
)
async def post_turn(
    request: Request, conversation_id: str, idempotency_key: IdempotencyKey = None
) -> TurnOut | Response:
    """Send a user message (`text`), or answer the question card that waits
    (`tool_response`); either starts a turn. With `Accept: text/event-stream`: the turn's
    frames; otherwise: its result once it ends. 409 when the policy is `reject` and a
    turn runs, or when the card answered is not the one waiting; 429 over a limit of
    the caller's (turns at once, turns a minute, files in a turn, open streams)."""
    context, caller = context_of(request), signed_in(request)  # no dependencies: hot
    found = await owned(context.runtime, caller, conversation_id)
    body, files = await read_turn_request(request)
    how = partial(context.runtime.submit, known=found)  # not read again to submit
    return await answer_turn_request(context, caller, request, conversation_id, body, files, how)


async def answer_turn_request(
    context: ServerContext,
    caller: Caller,
    request: Request,
    conversation_id: str,
    body: TurnRequest,
    files: Sequence[ImageBlock | FileBlock],
    how: Submit | None = None,
    model: Model | None = None,
) -> TurnOut | Response:
    """Admit a turn request (read, its conversation owned) and answer it: its frames, or
    its result; ``how`` submits it (``Runtime.submit`` unless told: an edit's, a
    regenerate's), ``model`` answers it instead of the conversation's."""
    runtime = context.runtime
    context.owner_limits.check_uploads(len(files))
    model = model or context.model_for(request)
    events = wants_events(request)
    claimed: Claimed | None = None
    key = request_key(request, body.client_message_id, conversation_id)
    if key is not None:
        print_ = fingerprint(request, body.model_dump(mode="json"), tuple(files))
        claim = await context.idempotency.claim(runtime.store, caller.owner, key, print_)
        if isinstance(claim, Earlier):
            return await answer_retry(
                context, caller, request, conversation_id, claim, key, events=events
            )
        claimed = claim
    asked = _Asked(context, caller.owner, conversation_id, body, model, files, claimed, how)
    if not events:
        started, queued = await asked.admit()
        handle = await asyncio.shield(started)
        position = queued.position if queued is not None else None
        return await finished_result(handle, runtime.store, position)
    return await _stream(asked, caller)


@dataclass(frozen=True, slots=True)
class _Asked:
    """One turn request, read and checked: what admitting it takes."""

    context: ServerContext
    owner: str
    conversation_id: str
    body: TurnRequest
    model: Model | None
    files: Sequence[ImageBlock | FileBlock]
    claimed: Claimed | None
    how: Submit | None = None

    async def admit(
        self, permit: Permit | None = None
    ) -> tuple[asyncio.Future[TurnHandle], QueuedInput | None]:
        return await admitted_once(
            self.context, self.owner, self.conversation_id, self.body, self.model, self.files,
            self.claimed, permit, self.how,
        )  # fmt: skip


async def _stream(asked: _Asked, caller: Caller) -> FrameStream:
    """The turn's frames as SSE (a stream slot of the caller's held while it is open)."""
    context, body = asked.context, asked.body
    ticket = await context.streams.open(caller)
    subscription = context.runtime.bus.subscribe(asked.conversation_id)

    def close() -> None:
        subscription.close()
        context.streams.close(ticket)

    live = context.live_for(ticket)
    try:
        if body.text is not None and _waits_for_a_slot(context.runtime, asked.conversation_id):
            return await _waiting_stream(asked, subscription, live, close)
        started, queued = await asked.admit()
    except BaseException:
        close()
        raise
    frames = turn_frames(subscription, started, live, queued_id=queued.id if queued else None)
    return FrameStream(
        frame_events(frames),
        on_close=close,
        on_abandon=cancel_when_begun(started) if body.cancel_on_disconnect else None,
    )


def _waits_for_a_slot(runtime: Runtime, conversation_id: str) -> bool:
    """A new message here would wait for a turn slot (``ostinato.admission``)."""
    return not runtime.busy(conversation_id) and runtime.admission.would_wait()


async def _waiting_stream(
    asked: _Asked, subscription: Subscription, live: Live, close: Callable[[], None]
) -> FrameStream:
    """Every turn slot is taken: the response starts now with an ``input.waiting`` frame
    and the message waits for a slot inside the stream (its turn's frames follow, or an
    ``error`` frame with ``overloaded`` when the wait runs out; nothing is stored). A
    client that goes away while it waits takes its message with it: it never runs."""
    runtime = asked.context.runtime
    permit = await turn_permit(asked.context, asked.owner, asked.body)  # a 429, as ever
    admission = runtime.admission
    waiting = InputWaiting(
        run_id="",
        seq=runtime.bus.last_seq(asked.conversation_id),
        position=admission.waiting + 1,
        wait_s=admission.wait,
        client_message_id=asked.body.client_message_id,
    )

    async def begun() -> TurnHandle:
        started, _ = await asked.admit(permit)
        return await asyncio.shield(started)

    turn = asyncio.ensure_future(begun())

    def closed() -> None:
        if not turn.done():
            turn.cancel()  # still waiting for a slot: nothing was stored
        close()

    frames = _first(waiting, turn_frames(subscription, turn, live))
    return FrameStream(
        frame_events(frames),
        on_close=closed,
        on_abandon=cancel_when_begun(turn) if asked.body.cancel_on_disconnect else None,
    )


async def _first(
    frame: Frame, then: AsyncGenerator[Frame | None, None]
) -> AsyncGenerator[Frame | None, None]:
    yield frame
    async with aclosing(then) as frames:
        async for each in frames:
            yield each


async def admitted_once(
    context: ServerContext,
    owner: str,
    conversation_id: str,
    body: TurnRequest,
    model: Model | None,
    files: Sequence[ImageBlock | FileBlock],
    claimed: Claimed | None,
    permit: Permit | None = None,
    how: Submit | None = None,
) -> tuple[asyncio.Future[TurnHandle], QueuedInput | None]:
    """``admitted``, telling the request's idempotency key (if it holds one) what it
    began, or that it stored nothing."""
    try:
        started, queued = await admitted(
            context, owner, conversation_id, body, model, files, permit, how
        )
    except BaseException as exc:
        if claimed is not None:
            await claimed.failed(exc)
        raise
    if claimed is not None:
        await claimed.began(conversation_id, TurnBegun(started, queued))
    return started, queued


async def admitted(
    context: ServerContext,
    owner: str,
    conversation_id: str,
    body: TurnRequest,
    model: Model | None,
    files: Sequence[ImageBlock | FileBlock] = (),
    permit: Permit | None = None,
    how: Submit | None = None,
) -> tuple[asyncio.Future[TurnHandle], QueuedInput | None]:
    """``begin`` within the owner's limits: a new message takes a turn permit (429 over
    a limit; ``permit`` when the caller took it already), held until its turn ends.
    Answering a card resumes a turn: no permit."""
    if body.text is None:
        return await begin(context.runtime, conversation_id, body, model, files)
    permit = permit or await turn_permit(context, owner, body)
    assert permit is not None
    try:
        started, queued = await begin(context.runtime, conversation_id, body, model, files, how)
    except BaseException:
        permit.release()
        raise
    release_when_done(permit, started)
    return started, queued


async def turn_permit(context: ServerContext, owner: str, body: TurnRequest) -> Permit | None:
    """The owner's permit for a new message's turn (``LimitExceeded`` over a limit);
    none for a card's answer."""
    return None if body.text is None else await context.owner_limits.begin_turn(owner)


def release_when_done(permit: Permit, started: asyncio.Future[TurnHandle]) -> None:
    """Give ``permit`` back when the turn ends (or fails to begin). What has happened
    already is acted on at once, not a loop pass later, so the permit is back before
    this request's answer says the turn ended: the next request finds it free."""

    def begun(future: asyncio.Future[TurnHandle]) -> None:
        if future.cancelled() or future.exception() is not None:
            permit.release()
            return
        task = future.result().task
        if task.done():
            permit.release()
        else:
            task.add_done_callback(lambda _: permit.release())

    if started.done():
        begun(started)
    else:
        started.add_done_callback(begun)


async def begin(
    runtime: Runtime,
    conversation_id: str,
    body: TurnRequest,
    model: Model | None,
    files: Sequence[ImageBlock | FileBlock] = (),
    how: Submit | None = None,
) -> tuple[asyncio.Future[TurnHandle], QueuedInput | None]:
    """Hand the request to the runtime (``how``, or its ``submit``). Returns once the turn
    has begun, or once its message is stored in the queue: the turn (when it begins), and
    the queued message."""
    if body.tool_response is not None:
        response = body.tool_response
        handle = await runtime.answer_card(
            conversation_id, response.tool_use_id, response.result, model=model
        )
        begun: asyncio.Future[TurnHandle] = asyncio.get_running_loop().create_future()
        begun.set_result(handle)
        return begun, None
    assert body.text is not None
    if files and body.tool_response is None:
        message: Message | str = Message("user", (TextBlock(body.text), *files))
    else:
        message = body.text
    submission = await (how or runtime.submit)(
        conversation_id,
        message,
        client_message_id=body.client_message_id,
        policy=body.policy,
        model=model,
        skill=body.agent,
        instructions=body.instructions,
    )
    if submission.queued is None:
        await submission.handle()  # raises what kept it from starting
    return submission.started, submission.queued


def cancel_when_begun(started: asyncio.Future[TurnHandle]) -> Callable[[], None]:
    """A callback that cancels this turn (and no other): at once if it runs, or as soon
    as it begins if it still waits in the queue."""

    def cancel(begun: asyncio.Future[TurnHandle]) -> None:
        if not begun.cancelled() and begun.exception() is None:
            task = begun.result().task
            if not task.done():
                task.cancel()

    def on_abandon() -> None:
        if started.done():
            cancel(started)
        else:  # runs after the turn's task has had its first step
            started.add_done_callback(cancel)

    return on_abandon


@router.post(
    "/{conversation_id}/cancel",
    response_model=CancelOut,
    responses={404: ERROR_RESPONSES[404], **CONFLICT},
)
async def cancel(context: Context, caller: CurrentCaller, conversation_id: str) -> CancelOut:
    """Cancel the running turn (it ends `cancelled`; a call waiting for approval is
    declined), or resolve what a paused conversation waits on (cards dismissed, approvals
    declined). 409 when nothing runs and nothing waits."""
    await owned(context.runtime, caller, conversation_id)
    outcome = await context.runtime.cancel(conversation_id)
    return CancelOut(cancelled_turn=outcome.cancelled_turn, dismissed=list(outcome.dismissed))
