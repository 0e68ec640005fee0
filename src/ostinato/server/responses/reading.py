"""A stored response: ``GET`` (polled, or streamed from its start or after an event),
``DELETE``, ``POST .../cancel`` and ``GET .../input_items``.

A response is read back from its record and its turn's rows (``steps.replay``); the
same event numbers come back whatever server answers. Streamed, a response that has not
ended goes on live: its turn's frames after the last row read (``steps.Follow``); one
whose message still waits for its turn is read again every half second until the
turn begins.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from contextlib import aclosing
from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi.responses import JSONResponse

from ostinato.errors import ClientError, Conflict
from ostinato.server.auth import Caller, CurrentCaller
from ostinato.server.context import Context, ServerContext
from ostinato.server.responses.docs import ROUTE_DOCS
from ostinato.server.responses.events import AnyEvent, EventLog, after
from ostinato.server.responses.record import (
    KIND,
    ResponseRecord,
    owned_response,
    snapshot,
)
from ostinato.server.responses.steps import Follow, Snapshot, replay
from ostinato.server.responses.wire import ResponsesError
from ostinato.server.sse import FrameStream
from ostinato.server.streams import Live, run_frames
from ostinato.store.protocol_records import records

QUEUED_POLL_S = 0.5


def add_routes(router: APIRouter, base: str) -> None:
    path = f"{base}/responses/{{response_id}}"
    router.add_api_route(path, get_response, methods=["GET"], **ROUTE_DOCS["get"])
    router.add_api_route(path, delete_response, methods=["DELETE"], **ROUTE_DOCS["delete"])
    router.add_api_route(
        f"{path}/cancel", cancel_response, methods=["POST"], **ROUTE_DOCS["cancel"]
    )
    router.add_api_route(
        f"{path}/input_items", input_items, methods=["GET"], **ROUTE_DOCS["input_items"]
    )


def _openai(error: ClientError | ResponsesError) -> JSONResponse:
    return (error if isinstance(error, ResponsesError) else ResponsesError.of(error)).response()


async def project(context: ServerContext, rec: ResponseRecord) -> tuple[EventLog, list[AnyEvent]]:
    log = EventLog(rec.id, rec.envelope)
    events = replay(log, await snapshot(context.runtime.store, rec))
    return log, events


async def get_response(
    context: Context,
    caller: CurrentCaller,
    response_id: str,
    stream: Annotated[bool, Query()] = False,
    starting_after: Annotated[int | None, Query(ge=0)] = None,
) -> Response:
    """A response, as it is now; with `stream=true`, its events (after `starting_after`),
    live until it ends."""
    try:
        rec = await owned_response(context.runtime.store, caller, response_id)
        if stream:
            return await streamed(context, caller, rec, starting_after)
        log, _ = await project(context, rec)
        return JSONResponse(log.current())
    except (ResponsesError, ClientError) as error:
        return _openai(error)


async def retried(
    context: ServerContext, caller: Caller, rec: ResponseRecord, printed: str | None, stream: bool
) -> Response:
    """A request sent again with its idempotency key: the first one's response."""
    found = await records(context.runtime.store).get_record(KIND, rec.id)
    if found is None:
        raise ResponsesError(
            409,
            "the first request with this Idempotency-Key is still starting; send it again",
            code="idempotency_key_in_progress",
        )
    first = ResponseRecord.of(found)
    if first.fingerprint != printed:
        raise ResponsesError(
            400,
            "this Idempotency-Key was sent before with another request",
            code="idempotency_key_reused",
        )
    if stream:
        return await streamed(context, caller, first, None)
    log, _ = await project(context, first)
    return JSONResponse(log.current())


async def streamed(
    context: ServerContext, caller: Caller, rec: ResponseRecord, starting_after: int | None
) -> FrameStream:
    ticket = await context.streams.open(caller)
    live = context.live_for(ticket)
    events = _resumed(context, rec, starting_after, live)
    return FrameStream(_encoded(events), on_close=lambda: context.streams.close(ticket))


async def _encoded(events: AsyncIterator[Iterable[AnyEvent] | None]) -> AsyncIterator[bytes]:
    async with aclosing(events):  # type: ignore[type-var]
        async for batch in events:
            if batch is None:
                yield b": ping\n\n"
            else:
                yield b"".join(event.encode() for event in batch)


async def _resumed(
    context: ServerContext, rec: ResponseRecord, sent: int | None, live: Live
) -> AsyncIterator[list[AnyEvent] | None]:
    """The response's events after event ``sent``: read back, then live."""
    store, bus = context.runtime.store, context.runtime.bus
    while True:
        snap = await snapshot(store, rec)
        if snap.turn is not None:
            break
        log = EventLog(rec.id, rec.envelope)
        out = list(after(replay(log, snap), sent))
        sent = _last(out, sent)
        yield out or None
        await asyncio.sleep(QUEUED_POLL_S)
    subscription = bus.subscribe(rec.conversation_id)
    try:
        snap = await snapshot(store, rec)  # again: nothing falls between it and the frames
        log = EventLog(rec.id, rec.envelope)
        out = list(after(replay(log, snap), sent))
        sent = _last(out, sent)
        yield out
        if log.ended or snap.turn is None or snap.turn.status == "finished":
            return
        async for batch in _live(log, snap, subscription, live):
            if batch is None:
                yield None
                continue
            out = list(after(batch, sent))
            sent = _last(out, sent)
            yield out
    finally:
        subscription.close()


def _last(events: list[AnyEvent], sent: int | None) -> int | None:
    return events[-1].number if events else sent


async def _live(
    log: EventLog, snap: Snapshot, subscription: object, live: Live
) -> AsyncIterator[list[AnyEvent] | None]:
    assert snap.turn is not None
    follow = Follow(log, calls=dict(snap.calls))
    follow.hidden.update(u.id for r in snap.rows if r.hidden for u in r.tool_uses)
    last = max((r.seq or 0 for r in snap.rows), default=0)
    frames = run_frames(subscription, live, snap.turn.run_id)  # type: ignore[arg-type]
    async with aclosing(frames):
        async for frame in frames:
            if frame is None:
                yield None
            elif frame.seq > last or (frame.seq == last and not frame.durable):
                yield follow.see(frame)
                if follow.ended:
                    return


async def delete_response(context: Context, caller: CurrentCaller, response_id: str) -> Response:
    """Delete a stored response (its conversation's rows stay)."""
    try:
        rec = await owned_response(context.runtime.store, caller, response_id)
    except ClientError as error:
        return _openai(error)
    await records(context.runtime.store).delete_record(KIND, rec.id)
    return JSONResponse({"id": rec.id, "object": "response", "deleted": True})


async def cancel_response(context: Context, caller: CurrentCaller, response_id: str) -> Response:
    """Cancel a response whose turn runs (it ends `cancelled`); one that has ended is
    answered as it is. 409 while its message still waits for its turn."""
    try:
        rec = await owned_response(context.runtime.store, caller, response_id)
        snap = await snapshot(context.runtime.store, rec)
        if snap.turn is None:
            raise Conflict("the response's message still waits for its turn: nothing runs yet")
        if snap.turn.status == "running":
            with contextlib.suppress(Conflict):  # it ended meanwhile
                await context.runtime.cancel(rec.conversation_id)
        log, _ = await project(context, rec)
        return JSONResponse(log.current())
    except ClientError as error:
        return _openai(error)


async def input_items(context: Context, caller: CurrentCaller, response_id: str) -> Response:
    """The input a response was made from: its user message, or the approval answers."""
    try:
        rec = await owned_response(context.runtime.store, caller, response_id)
    except ClientError as error:
        return _openai(error)
    snap = await snapshot(context.runtime.store, rec)
    data: list[dict[str, object]] = []
    for row in snap.rows:
        if row.role == "user" and row.metadata.get("client_message_id") == rec.message_id:
            content = [{"type": "input_text", "text": row.text}]
            data.append(
                {
                    "id": f"msg_{row.id}",
                    "type": "message",
                    "role": "user",
                    "status": "completed",
                    "content": content,
                }
            )
    for a in snap.answers:
        approve = a.ending is not None and a.ending.name == "APPROVED"
        data.append(
            {
                "id": f"mcpa_{a.id}",
                "type": "mcp_approval_response",
                "approval_request_id": f"mcpr_{a.id}",
                "approve": approve,
            }
        )
    first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
    return JSONResponse(
        {"object": "list", "data": data, "first_id": first, "last_id": last, "has_more": False}
    )
