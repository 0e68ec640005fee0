"""The two event streams the API serves, as async generators of SSE bytes.

Both read frames from a bus subscription opened *before* anything they show happens (the
turn starts, the store is read), so no frame can fall between setting up and streaming.

- ``turn_events``: the frames of one turn (its ``run_id``), up to ``turn.finished``.
- ``conversation_events``: the committed rows after a position, replayed from the store
  as ``message`` frames, then the live frames of every turn. A live frame that the
  replay already covered is dropped: a ``message`` whose seq was replayed, and any other
  frame whose seq is older than the last replayed row (it happened before that row).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing

from ostinato.bus import BacklogOverflow, Subscription
from ostinato.frames import ErrorFrame, Frame, MessageCommitted, TurnFinished
from ostinato.messages import Message
from ostinato.server.sse import PING, encode_frame
from ostinato.store.base import Store

REPLAY_PAGE = 500
OVERFLOW = "this stream fell too far behind and was closed; reconnect with Last-Event-ID"
CLOSING = "the server is shutting down; reconnect with Last-Event-ID"


class _Closing(Exception):
    """The server is shutting down: the stream ends so the connection can close."""


async def _frames(
    subscription: Subscription, ping_interval: float, closing: asyncio.Event
) -> AsyncGenerator[Frame | None, None]:
    """The subscription's frames, with ``None`` for each ``ping_interval`` of silence;
    raises ``_Closing`` once ``closing`` is set and no frame is waiting."""
    closed = asyncio.ensure_future(closing.wait())
    getter: asyncio.Future[Frame] | None = None
    try:
        while True:
            if getter is None:
                getter = asyncio.ensure_future(subscription.__anext__())
            done, _ = await asyncio.wait(
                (getter, closed), timeout=ping_interval, return_when=asyncio.FIRST_COMPLETED
            )
            if getter in done:
                finished, getter = getter, None
                try:
                    frame = finished.result()
                except StopAsyncIteration:
                    return
                yield frame
            elif closed in done:
                raise _Closing
            else:
                yield None
    finally:
        closed.cancel()
        if getter is not None:
            getter.cancel()


async def turn_events(
    subscription: Subscription, run_id: str, *, ping_interval: float, closing: asyncio.Event
) -> AsyncIterator[bytes]:
    seq = 0
    try:
        async with aclosing(_frames(subscription, ping_interval, closing)) as frames:
            async for frame in frames:
                if frame is None:
                    yield PING
                elif frame.run_id == run_id:
                    seq = frame.seq
                    yield encode_frame(frame)
                    if isinstance(frame, TurnFinished):
                        return
    except BacklogOverflow:
        yield encode_frame(ErrorFrame(run_id=run_id, seq=seq, code="overflow", message=OVERFLOW))
    except _Closing:
        yield encode_frame(ErrorFrame(run_id=run_id, seq=seq, code="closing", message=CLOSING))


async def conversation_events(
    subscription: Subscription,
    store: Store,
    conversation_id: str,
    *,
    after_seq: int,
    ping_interval: float,
    closing: asyncio.Event,
) -> AsyncIterator[bytes]:
    runs: dict[str, str] = {}
    last = after_seq
    async for row in _stored_rows(store, conversation_id, after_seq):
        last = row.seq or last
        if row.turn_id and row.turn_id not in runs:  # a turn newer than the ones we know
            runs = {turn.id: turn.run_id for turn in await store.list_turns(conversation_id)}
            runs.setdefault(row.turn_id, "")  # no record of it: do not look again
        run_id = runs.get(row.turn_id or "", "")
        yield encode_frame(MessageCommitted(run_id=run_id, seq=last, message=row))
    try:
        async with aclosing(_frames(subscription, ping_interval, closing)) as frames:
            async for frame in frames:
                if frame is None:
                    yield PING
                elif frame.seq > last or (frame.seq == last and not frame.durable):
                    yield encode_frame(frame)
    except BacklogOverflow:
        yield encode_frame(ErrorFrame(run_id="", seq=last, code="overflow", message=OVERFLOW))
    except _Closing:
        yield encode_frame(ErrorFrame(run_id="", seq=last, code="closing", message=CLOSING))


async def _stored_rows(
    store: Store, conversation_id: str, after_seq: int
) -> AsyncIterator[Message]:
    while True:
        rows = await store.list_messages(conversation_id, after_seq=after_seq, limit=REPLAY_PAGE)
        for row in rows:
            yield row
        if len(rows) < REPLAY_PAGE:
            return
        after_seq = rows[-1].seq or after_seq
