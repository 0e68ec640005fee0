"""``POST /v1/responses``: a response of an agent, in OpenAI's Responses API.

``model`` names the agent as on ``/v1/chat/completions``: ``ostinato`` (the default
agent), an agent's id, or a model id ``/v1/models`` lists (the default agent with that
model). The request continues a conversation or opens one, and starts what its input
asks (``acting``). Then, by ``stream`` and ``background``:

- neither: the answer is the response once it has ended (its turn ended, or a call
  waits for approval);
- ``stream``: its events (``steps``, ``events``), ending with ``response.completed``
  (or ``failed`` / ``incomplete``); a client that goes away cancels its turn, unless
  the response is a ``background`` one;
- ``background`` alone: the response at once (``queued`` or ``in_progress``), its turn
  running on; ``GET /v1/responses/{id}`` polls it, with ``stream=true`` streams it.

A response is stored (``record``) unless ``store: false``. With an ``Idempotency-Key``
header the same request sent again answers with the first one's response (its id is
made from the key) and starts nothing; another request with that key is a 400
``idempotency_key_reused``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from ostinato.errors import ClientError
from ostinato.frames import Frame, TextDeltaFrame
from ostinato.ids import new_id
from ostinato.server.auth import Caller, CurrentCaller
from ostinato.server.context import Context, ServerContext
from ostinato.server.responses import reading
from ostinato.server.responses.acting import Plan, Started, conversation_for, plan, start
from ostinato.server.responses.docs import CREATE_DOC
from ostinato.server.responses.events import EventLog, encode
from ostinato.server.responses.record import ResponseRecord
from ostinato.server.responses.steps import Follow
from ostinato.server.responses.target import target
from ostinato.server.responses.wire import (
    Envelope,
    ResponseRequest,
    ResponsesError,
    read_input,
)
from ostinato.server.sse import FrameStream
from ostinato.store.base import Store
from ostinato.store.protocol_records import records

KEY_HEADER = "idempotency-key"
Frames = AsyncGenerator[Frame | None, None]


def make_router(base: str) -> APIRouter:
    """The Responses API's routes under ``base`` (``/v1`` and ``/openai/v1``)."""
    router = APIRouter(tags=["responses"])
    router.add_api_route(f"{base}/responses", create_response, methods=["POST"], **CREATE_DOC)
    reading.add_routes(router, base)
    return router


async def create_response(context: Context, caller: CurrentCaller, request: Request) -> Response:
    """Create a response (OpenAI's Responses API; see docs/clients.md)."""
    try:
        return await _create(context, caller, request)
    except ResponsesError as error:
        return error.response()
    except ClientError as error:
        headers: dict[str, str] = {}
        retry_after = getattr(error, "retry_after", None)  # a limit's 429
        if retry_after is not None:
            headers["retry-after"] = str(retry_after)
        return ResponsesError.of(error).response(headers)


async def _create(context: ServerContext, caller: Caller, request: Request) -> Response:
    raw = await request.body()
    body = ResponseRequest.read(raw)
    given = read_input(body.input)
    chosen = target(context, request, body.model)
    store = context.runtime.store
    rid, printed = _identity(caller, request, raw)
    if printed is not None:
        earlier = await records(store).get_record("response", rid)
        if earlier is not None:
            return await reading.retried(
                context, caller, ResponseRecord.of(earlier), printed, bool(body.stream)
            )
    cid = await conversation_for(context, caller, body, given)
    step = await plan(context, caller, cid, body, given)
    envelope = Envelope.now(rid, body, cid)
    rec = ResponseRecord(
        rid,
        caller.owner,
        cid,
        await _last_seq(store, cid),
        envelope,
        message_id=rid if step.text is not None else None,
        answers=[a.id for a in step.answers],
        fingerprint=printed,
    )
    if body.store is not False and not await records(store).put_record(
        rec.to_record(), create=True
    ):
        return await reading.retried(context, caller, rec, printed, bool(body.stream))
    try:
        return await _run(context, caller, body, step, rec, chosen, given.instructions)
    except BaseException:
        if body.store is not False:
            await records(store).delete_record("response", rid)
        raise


def _identity(caller: Caller, request: Request, raw: bytes) -> tuple[str, str | None]:
    """The response's id, and the request's fingerprint when it has an idempotency key
    (the id is then made from the key, so a retry finds the first one's response)."""
    key = request.headers.get(KEY_HEADER)
    if not key:
        return f"resp_{new_id()}", None
    if len(key) > 200 or not key.isprintable():
        raise ResponsesError(400, "Idempotency-Key must be 1 to 200 printable characters")
    made = hashlib.sha256(f"{caller.owner}\x00{key}".encode()).hexdigest()[:40]
    try:
        canonical = json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":"))
    except ValueError:
        canonical = raw.decode(errors="replace")
    printed = hashlib.sha256(f"{request.url.path}\n{canonical}".encode()).hexdigest()
    return f"resp_{made}", printed


async def _last_seq(store: Store, cid: str) -> int:
    window = await store.window(cid, limit=1)
    rows = [*window.rows, *([window.summary] if window.summary else [])]
    return max((r.seq or 0 for r in rows), default=0)


async def _run(
    context: ServerContext,
    caller: Caller,
    body: ResponseRequest,
    step: Plan,
    rec: ResponseRecord,
    chosen: Any,
    extra_instructions: str | None,
) -> Response:
    runtime = context.runtime
    instructions = "\n\n".join(t for t in (body.instructions, extra_instructions) if t) or None
    ticket = await context.streams.open(caller) if body.stream else None
    subscription = runtime.bus.subscribe(rec.conversation_id)

    def close() -> None:
        subscription.close()
        if ticket is not None:
            context.streams.close(ticket)

    try:
        live = context.live_for(ticket) if ticket is not None else context.live
        started = await start(
            context,
            caller,
            step,
            message_id=rec.id,
            model=chosen.model,
            skill=chosen.skill,
            instructions=instructions,
            subscription=subscription,
            live=live,
        )
    except BaseException:
        close()
        raise
    follow = Follow(EventLog(rec.id, rec.envelope), calls=started.calls)
    opening = follow.start(started.queued, step.answers)
    if body.stream:
        events = _stream(opening, started, follow)
        on_abandon = None if body.background else started.on_abandon
        return FrameStream(events, on_close=close, on_abandon=on_abandon)
    if body.background:
        close()
        await started.frames.aclose()
        return JSONResponse(follow.log.current())
    try:
        async with aclosing(started.frames) as frames:
            async for frame in frames:
                if frame is not None:
                    follow.see(frame)
                    if follow.ended:
                        break
    finally:
        close()
    return JSONResponse(follow.log.current())


async def _stream(opening: list[Any], started: Started, follow: Follow) -> AsyncIterator[bytes]:
    yield encode(opening)
    async with aclosing(started.frames) as frames:
        async for frame in frames:
            if frame is None:
                yield b": ping\n\n"
                continue
            if type(frame) is TextDeltaFrame:  # most frames, while the message is open
                chunk = follow.log.delta_bytes(frame.text)
                if chunk is not None:
                    yield chunk
                    continue
            out = follow.see(frame)
            if len(out) == 1:  # one text delta
                yield out[0].encode()
            elif out:
                yield encode(out)
            if follow.ended:
                return
