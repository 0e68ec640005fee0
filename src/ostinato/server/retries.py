"""Answering a retried turn request (``server.idempotency``): the first request's turn,
as its result (JSON) or as its frames (Server-Sent Events), whichever the retry asks for.

The first request is in this process (``TurnBegun``: its turn, begun or still queued)
or it was made elsewhere or before a restart (its stored ``RequestKey``: the turn it
began, read back from the store). Either way nothing is stored and no turn begins.
"""

from __future__ import annotations

import asyncio

from fastapi import Request, Response

from ostinato.errors import StoreError
from ostinato.server.auth import Caller
from ostinato.server.context import ServerContext
from ostinato.server.idempotency import REUSED, Earlier, KeyReused, TurnBegun, record_of
from ostinato.server.results import finished_result, stored_result
from ostinato.server.schemas import TurnOut
from ostinato.server.sse import FrameStream, frame_events
from ostinato.server.streams import stored_turn_frames, turn_frames
from ostinato.store.base import Store, Turn
from ostinato.store.idempotency import RequestKey

WAKE_S = 1.0  # how often a wait for a turn run elsewhere reads its row again


async def answer_retry(
    context: ServerContext,
    caller: Caller,
    request: Request,
    conversation_id: str,
    earlier: Earlier,
    key: str,
    *,
    events: bool,
) -> TurnOut | Response:
    """The answer to a request whose key an earlier turn request took."""
    outcome = await asyncio.shield(earlier.outcome) if earlier.outcome is not None else None
    if isinstance(outcome, TurnBegun):
        return await _joined(context, caller, conversation_id, outcome, events=events)
    if outcome is not None and not isinstance(outcome, RequestKey):
        raise KeyReused(REUSED)  # the key was taken by another kind of request
    earlier = Earlier(None, outcome or earlier.record)
    store = context.runtime.store
    record = await record_of(context.idempotency, earlier, store, caller.owner, key)
    if record.turn_id is None or record.conversation_id != conversation_id:
        raise KeyReused(REUSED)
    if not events:
        turn = await _finished_turn(context, conversation_id, record.turn_id)
        after = record.after_seq or 0
        return await stored_result(
            store, turn, after_seq=after, queued_position=record.queued_position
        )
    return await _replayed(context, caller, conversation_id, record)


async def _joined(
    context: ServerContext, caller: Caller, conversation_id: str, begun: TurnBegun, *, events: bool
) -> TurnOut | Response:
    """A first request in this process: its turn, joined."""
    position = begun.queued.position if begun.queued is not None else None
    if not events:
        handle = await asyncio.shield(begun.started)
        return await finished_result(handle, context.runtime.store, position)
    ticket = await context.streams.open(caller)
    subscription = context.runtime.bus.subscribe(conversation_id)

    def close() -> None:
        subscription.close()
        context.streams.close(ticket)

    live = context.live_for(ticket)
    if not begun.started.done() or begun.started.exception() is not None:
        queued_id = begun.queued.id if begun.queued is not None else None
        frames = turn_frames(subscription, begun.started, live, queued_id=queued_id)
        return FrameStream(frame_events(frames), on_close=close)
    handle = begun.started.result()
    after = (handle.rows[0].seq or 1) - 1 if handle.rows else 0
    try:
        turn = await _turn(context.runtime.store, handle.turn.id)
    except BaseException:
        close()
        raise
    replay = stored_turn_frames(subscription, context.runtime.store, turn, live, after_seq=after)
    return FrameStream(frame_events(replay), on_close=close)


async def _replayed(
    context: ServerContext, caller: Caller, conversation_id: str, record: RequestKey
) -> Response:
    assert record.turn_id is not None
    ticket = await context.streams.open(caller)
    subscription = context.runtime.bus.subscribe(conversation_id)

    def close() -> None:
        subscription.close()
        context.streams.close(ticket)

    try:
        turn = await _turn(context.runtime.store, record.turn_id)
    except BaseException:
        close()
        raise
    live = context.live_for(ticket)
    after = record.after_seq or 0
    replay = stored_turn_frames(subscription, context.runtime.store, turn, live, after_seq=after)
    return FrameStream(frame_events(replay), on_close=close)


async def _turn(store: Store, turn_id: str) -> Turn:
    turn = await store.get_turn(turn_id)
    if turn is None:
        raise StoreError(f"the turn {turn_id!r} of an idempotency key is not in the store")
    return turn


async def _finished_turn(context: ServerContext, conversation_id: str, turn_id: str) -> Turn:
    """The turn once it has ended (it may run in this process, or in another)."""
    subscription = context.runtime.bus.subscribe(conversation_id)
    try:
        while True:
            turn = await _turn(context.runtime.store, turn_id)
            if turn.status == "finished":
                return turn
            try:
                async with asyncio.timeout(WAKE_S):
                    async for frame in subscription:
                        if frame.type == "turn.finished" and frame.run_id == turn.run_id:
                            break
            except TimeoutError:
                pass
    finally:
        subscription.close()
