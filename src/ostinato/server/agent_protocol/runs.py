"""Runs: ``POST .../runs`` (in the background), ``.../runs/stream``, ``.../runs/wait``,
a run read, joined (``join``, ``stream`` again with ``Last-Event-ID``), cancelled, and
listed. A run is a turn (``record``); what it starts is ``starting``'s; its stream is
``events``'. A streamed run whose client goes away goes on (``on_disconnect: "cancel"``
cancels it); the answer's ``Location`` names its stream, to join again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import aclosing, suppress
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Query, Response
from fastapi.responses import JSONResponse

from ostinato.errors import Conflict, InvalidRequest, NotFound
from ostinato.ids import new_id
from ostinato.server.agent_protocol.events import MODES, REFUSED_MODES, RunStream
from ostinato.server.agent_protocol.record import (
    KIND,
    RunRecord,
    owned_run,
    run_json,
    run_state,
)
from ostinato.server.agent_protocol.starting import RunRequest, Started, start
from ostinato.server.agent_protocol.threads import assistant_ids, last_seq, thread_of
from ostinato.server.agent_protocol.wire import PREFIX, messages_of
from ostinato.server.auth import Caller, CurrentCaller
from ostinato.server.context import Context, ServerContext
from ostinato.server.sse import FrameStream
from ostinato.server.streams import Live, run_frames
from ostinato.store.protocol_records import records

router = APIRouter(tags=["agent-protocol"])
RUNS = f"{PREFIX}/threads/{{thread_id}}/runs"
RunBody = Annotated[
    dict[str, Any],
    Body(
        description="assistant_id, input {messages} or command {resume}, stream_mode, "
        "metadata, multitask_strategy (reject, enqueue, interrupt), on_disconnect"
    ),
]


def read(context: ServerContext, raw: dict[str, Any]) -> RunRequest:
    try:
        body = RunRequest.model_validate(raw)
    except ValueError as exc:
        raise InvalidRequest(f"the run request does not validate: {exc}") from None
    body.check()
    for mode in body.modes:
        if mode in REFUSED_MODES:
            raise InvalidRequest(f"stream_mode {mode!r} ({REFUSED_MODES[mode]}) is not supported")
        if mode not in MODES:
            raise InvalidRequest(f"unknown stream_mode {mode!r} (supported: {sorted(MODES)})")
    if body.assistant_id not in assistant_ids(context):
        raise NotFound(f"no assistant with id {body.assistant_id!r}")
    return body


async def _begin(
    context: ServerContext, caller: Caller, tid: str, body: RunRequest, live: Live
) -> tuple[RunRecord, Started, RunStream, Any]:
    """Store the run, start it, and make its stream (a subscription held until the
    caller closes it)."""
    store = context.runtime.store
    await thread_of(context, caller, tid)
    run_id = new_id()
    subscription = context.runtime.bus.subscribe(tid)
    try:
        rows = await store.list_messages(tid)
        after = last_seq(rows)
        started = await start(context, caller, tid, body, run_id, subscription, live, after)
    except BaseException:
        subscription.close()
        raise
    run = RunRecord(
        run_id,
        caller.owner,
        tid,
        body.assistant_id,
        after,
        started.message_id,
        started.answers,
        dict(body.metadata or {}),
        body.multitask_strategy or "reject",
    )
    await records(store).put_record(run.to_record(), create=True)
    return run, started, RunStream(run_id, frozenset(body.modes), list(rows)), subscription


@router.post(f"{RUNS}/stream", responses={404: {}, 409: {}, 422: {}, 429: {}})
async def stream_run(
    context: Context, caller: CurrentCaller, thread_id: str, raw: RunBody
) -> FrameStream:
    """Create a run and stream it."""
    body = read(context, raw)
    ticket = await context.streams.open(caller)
    try:
        run, started, stream, subscription = await _begin(
            context, caller, thread_id, body, context.live_for(ticket)
        )
    except BaseException:
        context.streams.close(ticket)
        raise

    def close() -> None:
        subscription.close()
        context.streams.close(ticket)

    abandon = started.on_abandon if body.on_disconnect == "cancel" else None
    answer = FrameStream(_events(stream, started.frames), on_close=close, on_abandon=abandon)
    answer.headers["location"] = f"/threads/{thread_id}/runs/{run.id}/stream"
    answer.headers["content-location"] = f"/threads/{thread_id}/runs/{run.id}"
    return answer


async def _events(stream: RunStream, frames: Any) -> AsyncIterator[bytes]:
    yield stream.start()
    async with aclosing(frames):
        async for frame in frames:
            if frame is None:
                yield b": ping\n\n"
                continue
            out = stream.see(frame)
            if out:
                yield out
            if stream.ended:
                return


@router.post(RUNS, responses={404: {}, 409: {}, 422: {}, 429: {}})
async def create_run(
    context: Context, caller: CurrentCaller, thread_id: str, raw: RunBody
) -> JSONResponse:
    """Create a run in the background: the answer is the run, its turn goes on."""
    body = read(context, raw)
    run, started, _, subscription = await _begin(context, caller, thread_id, body, context.live)
    subscription.close()
    await started.frames.aclose()
    state = await run_state(context.runtime.store, run)
    answer = JSONResponse(run_json(run, state))
    answer.headers["content-location"] = f"/threads/{thread_id}/runs/{run.id}"
    return answer


@router.post(f"{RUNS}/wait", responses={404: {}, 409: {}, 422: {}, 429: {}})
async def wait_run(
    context: Context, caller: CurrentCaller, thread_id: str, raw: RunBody
) -> JSONResponse:
    """Create a run and answer with the thread's values once it ends or waits."""
    body = read(context, raw)
    run, started, stream, subscription = await _begin(
        context, caller, thread_id, body, context.live
    )
    try:
        async with aclosing(started.frames) as frames:
            async for frame in frames:
                if frame is not None:
                    stream.see(frame)
                    if stream.ended:
                        break
    finally:
        subscription.close()
    answer = JSONResponse(await _values(context, caller, run))
    answer.headers["content-location"] = f"/threads/{thread_id}/runs/{run.id}"
    return answer


async def _values(context: ServerContext, caller: Caller, run: RunRecord) -> dict[str, Any]:
    from ostinato.server.agent_protocol.threads import state_of

    state = await state_of(context, caller, run.thread_id)
    values: dict[str, Any] = dict(state["values"])
    if state["interrupts"]:
        values["__interrupt__"] = state["interrupts"]
    return values


@router.get(RUNS, responses={404: {}})
async def list_runs(
    context: Context,
    caller: CurrentCaller,
    thread_id: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
) -> JSONResponse:
    """The thread's runs, newest first."""
    await thread_of(context, caller, thread_id)
    store = context.runtime.store
    found = await records(store).list_records(KIND, conversation_id=thread_id, limit=limit)
    out = []
    for record in found:
        run = RunRecord.of(record)
        out.append(run_json(run, await run_state(store, run), record.created_at))
    return JSONResponse(out)


@router.get(f"{RUNS}/{{run_id}}", responses={404: {}})
async def get_run(
    context: Context, caller: CurrentCaller, thread_id: str, run_id: str
) -> JSONResponse:
    """One run, with its status."""
    store = context.runtime.store
    run = await owned_run(store, caller, thread_id, run_id)
    return JSONResponse(run_json(run, await run_state(store, run)))


@router.get(f"{RUNS}/{{run_id}}/join", responses={404: {}})
async def join_run(
    context: Context, caller: CurrentCaller, thread_id: str, run_id: str
) -> JSONResponse:
    """Wait for a run to end (or wait for a person); the thread's values then."""
    store = context.runtime.store
    run = await owned_run(store, caller, thread_id, run_id)
    subscription = context.runtime.bus.subscribe(thread_id)
    try:
        state = await run_state(store, run)
        if not state.done and state.turn is not None:
            stream = RunStream(run.id, frozenset())
            async with aclosing(run_frames(subscription, context.live, state.turn.run_id)) as fs:
                async for frame in fs:
                    if frame is not None and (stream.see(frame) or stream.ended):
                        break
        while state.turn is None:  # its message waits for its turn
            await asyncio.sleep(0.2)
            state = await run_state(store, run)
    finally:
        subscription.close()
    answer = JSONResponse(await _values(context, caller, run))
    answer.headers["content-location"] = f"/threads/{thread_id}/runs/{run.id}"
    return answer


@router.get(f"{RUNS}/{{run_id}}/stream", responses={404: {}, 429: {}})
async def join_stream(
    context: Context,
    caller: CurrentCaller,
    thread_id: str,
    run_id: str,
    stream_mode: Annotated[list[str] | None, Query()] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> Response:
    """A run's stream again: its rows after `Last-Event-ID` (a row's seq), then live."""
    store = context.runtime.store
    run = await owned_run(store, caller, thread_id, run_id)
    modes = frozenset(_modes(stream_mode)) & MODES
    try:
        after = int(last_event_id) if last_event_id else run.after_seq
    except ValueError:
        raise InvalidRequest("Last-Event-ID must be a row's seq, as this stream sent it") from None
    async with context.watch(caller, thread_id) as watched:
        state = await run_state(store, run)
        earlier = [r for r in await store.list_messages(thread_id) if (r.seq or 0) <= after]
    stream = RunStream(run.id, modes, earlier)
    events = _rejoined(stream, state, after, watched.subscription, watched.live)
    return FrameStream(events, on_close=watched.close)


def _modes(asked: list[str] | None) -> list[str]:
    """The stream modes a query names: repeated, or one JSON list (the JS client's)."""
    out: list[str] = []
    for value in asked or ["values"]:
        if value.startswith("["):
            try:
                found = json.loads(value)
            except ValueError:
                raise InvalidRequest(f"stream_mode {value!r} is not a JSON list") from None
            out += [str(v) for v in found] if isinstance(found, list) else []
        else:
            out.append(value)
    return out


async def _rejoined(
    stream: RunStream, state: Any, after: int, subscription: Any, live: Live
) -> AsyncIterator[bytes]:
    replayed = [r for r in state.rows if (r.seq or 0) > after]
    for row in replayed:
        out = stream.row(row)
        if out:
            yield out
    last = max((r.seq or 0 for r in replayed), default=after)
    if state.done or state.turn is None:
        yield b"event: end\ndata: null\n\n"
        return
    async with aclosing(run_frames(subscription, live, state.turn.run_id)) as frames:
        async for frame in frames:
            if frame is None:
                yield b": ping\n\n"
            elif frame.seq > last or (frame.seq == last and not frame.durable):
                out = stream.see(frame)
                if out:
                    yield out
                if stream.ended:
                    return


@router.post(f"{RUNS}/{{run_id}}/cancel", status_code=204, responses={404: {}})
async def cancel_run(
    context: Context, caller: CurrentCaller, thread_id: str, run_id: str
) -> Response:
    """Cancel a run whose turn runs (it ends interrupted); one that ended stays so."""
    store = context.runtime.store
    run = await owned_run(store, caller, thread_id, run_id)
    state = await run_state(store, run)
    if state.turn is not None and state.turn.status == "running":
        with suppress(Conflict):
            await context.runtime.cancel(thread_id)
    return Response(status_code=204)


__all__ = ["messages_of", "router"]
