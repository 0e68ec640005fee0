"""The event streams the API serves, as async generators of frames.

Every stream reads frames from a bus subscription opened *before* anything it shows
happens (the turn starts, the store is read), so no frame can fall between setting up and
streaming. A stream yields ``None`` for each ``ping_interval`` of silence (SSE sends a
``: ping`` comment for it) and ends with an ``error`` frame when it must stop early:
``overflow`` (it fell too far behind), ``closing`` (the server is shutting down) or
``unauthorized`` (the credential it was opened with was revoked or expired). The
wire formats are elsewhere: ``sse.frame_events`` for Server-Sent Events, the WebSocket
route for JSON messages; both serve the same frames.

- ``turn_frames``: the frames of one turn, up to its ``turn.finished``. The turn may not
  have begun yet (its message waits in the queue): then the stream first carries the
  message's ``input.queued`` frame, and the turn's frames once it begins.
- ``stored_turn_frames``: the frames of one turn that began earlier (a retried request
  joins it): ``turn.started`` and its committed rows read back from the store, then its
  live frames after those rows, up to ``turn.finished`` (made from the turn's row when
  it has ended already).
- ``subscription_frames``: every frame since the subscription opened, unfiltered.
- ``watching``: how a route opens a stream: its ticket (a stream permit, and the
  credential re-checked while it is open) and its bus subscription, both given back if
  setting up the stream fails, else by the response's ``on_close``.
- ``conversation_frames``: the committed rows after a position, replayed from the store
  as ``message`` frames, then the live frames of every turn. A live frame that the replay
  already covered is dropped: a ``message`` whose seq was replayed, and any other frame
  whose seq is older than the last replayed row (it happened before that row). A live
  frame that shows rows were committed that no frame announced (its seq is ahead of the
  last row streamed: a server died between its commit and its frame, or recovery on
  another server wrote them) is preceded by those rows, read from the store. With
  ``deltas=False`` the ephemeral progress frames are left out (rows only).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ostinato import observe
from ostinato.bus import BacklogOverflow, Bus, Subscription
from ostinato.frames import (
    BranchChanged,
    ErrorFrame,
    Frame,
    InputQueued,
    MessageCommitted,
    TextDeltaFrame,
    TextDiscarded,
    ThinkingDeltaFrame,
    ToolProgress,
    TurnFinished,
    TurnStarted,
)
from ostinato.messages import Message
from ostinato.redaction import redact
from ostinato.server.stream_wake import Bell, Silence
from ostinato.store.base import STATE_AFTER, Store, Turn
from ostinato.submissions import TurnHandle

if TYPE_CHECKING:
    from ostinato.server.auth.caller import Caller
    from ostinato.server.auth.guard import StreamGuard, StreamTicket

REPLAY_PAGE = 500
OVERFLOW = "this stream fell too far behind and was closed; reconnect with Last-Event-ID"
CLOSING = "the server is shutting down; reconnect with Last-Event-ID"
REVOKED = "the credential this stream was opened with was revoked or has expired; sign in again"
EPHEMERAL = (TextDeltaFrame, ThinkingDeltaFrame, TextDiscarded, ToolProgress)
"""Progress frames that carry nothing durable: ``deltas=false`` leaves them out."""


def _not_begun(error: BaseException | None, seq: int) -> ErrorFrame:
    code = getattr(error, "code", "not_started")
    message = getattr(error, "message", None) or "the turn could not begin"
    return ErrorFrame(run_id="", seq=seq, code=str(code), message=redact(str(message)))


class _Closing(Exception):
    """The server is shutting down: the stream ends so the connection can close."""

    code, message = "closing", CLOSING


class _Revoked(_Closing):
    """The stream's credential no longer holds: it ends."""

    code, message = "unauthorized", REVOKED


@dataclass(frozen=True, slots=True)
class Live:
    """What every live stream needs: how often to ping, and when to stop (the server
    closes, or the stream's credential is revoked)."""

    ping_interval: float
    closing: asyncio.Event
    revoked: asyncio.Event | None = None


@dataclass(frozen=True, slots=True)
class Watched:
    """An open stream's subscription and ``Live`` (it ends when its credential does)."""

    subscription: Subscription
    live: Live
    guard: StreamGuard
    ticket: StreamTicket

    def close(self) -> None:
        """The stream ended: close its subscription and give its permit back."""
        self.subscription.close()
        self.guard.close(self.ticket)


@asynccontextmanager
async def watching(
    guard: StreamGuard, bus: Bus, caller: Caller, conversation_id: str, base: Live
) -> AsyncIterator[Watched]:
    """Open a stream of ``caller`` on a conversation's frames: a ticket (``LimitExceeded``
    over the owner's stream limit), then the subscription. If the block raises, both are
    closed; if it returns, the response the block made owns them (``on_close=w.close``)."""
    ticket = await guard.open(caller)
    live = Live(base.ping_interval, base.closing, ticket.revoked)
    watched = Watched(bus.subscribe(conversation_id), live, guard, ticket)
    try:
        yield watched
    except BaseException:
        watched.close()
        raise


async def _frames(
    subscription: Subscription, live: Live, wake: asyncio.Future[TurnHandle] | None = None
) -> AsyncGenerator[Frame | None, None]:
    """The subscription's frames, with ``None`` for each ``ping_interval`` of silence and
    once when ``wake`` completes; raises ``_Closing`` once ``closing`` is set and no
    frame is waiting.

    Between frames it waits on one bell (``stream_wake.Bell``) that each of those
    rings: a frame put on the subscription, the server closing, the credential revoked,
    ``wake``, the silence over; then it looks at each in that order. (``asyncio.wait`` on
    them all put a callback on each and took it off again, and a task read the
    subscription, for every frame.)"""
    bell = Bell(asyncio.get_running_loop())
    closed = asyncio.ensure_future(live.closing.wait())
    revoked = asyncio.ensure_future(live.revoked.wait()) if live.revoked is not None else None
    ringing = [f for f in (closed, revoked, wake) if f is not None]
    for future in ringing:
        future.add_done_callback(bell.ring)
    silence = Silence(live.ping_interval, bell.ring)
    subscription.bell = bell.ring
    observe.streams(1)  # open streams, for the metrics
    try:
        while True:
            try:
                frame = subscription.poll()
            except StopAsyncIteration:
                return
            if frame is not None:
                silence.heard()
                yield frame  # a frame was waiting: no futures, no wait
            elif revoked is not None and revoked.done():
                raise _Revoked
            elif closed.done():
                raise _Closing
            elif (wake is not None and wake.done()) or silence.over:
                if wake is not None and wake.done():
                    wake = None
                silence.heard()
                yield None
            else:
                await bell.wait()
    finally:
        subscription.bell = None
        for future in ringing:
            future.remove_done_callback(bell.ring)
        observe.streams(-1)
        silence.stop()
        closed.cancel()
        if revoked is not None:
            revoked.cancel()


async def turn_frames(
    subscription: Subscription,
    started: asyncio.Future[TurnHandle],
    live: Live,
    *,
    queued_id: str | None = None,
) -> AsyncGenerator[Frame | None, None]:
    """One turn's frames, up to ``turn.finished``. ``started`` resolves to the turn once
    it has begun; until then the stream carries the ``input.queued`` frame of
    ``queued_id`` (its message waits behind another turn)."""
    waiting = _Waiting(started, queued_id)
    run_id: str | None = None
    seq = 0
    try:
        async with aclosing(_frames(subscription, live, wake=waiting.wake)) as frames:
            async for frame in frames:
                seq = frame.seq if frame is not None else seq
                if run_id is None:
                    out, run_id = waiting.see(frame)
                else:
                    out = [frame] if frame is None or frame.run_id == run_id else []
                for item in out:
                    yield item
                    if isinstance(item, TurnFinished):
                        return
    except _NotBegun as failed:
        yield failed.frame
    except BacklogOverflow:
        yield ErrorFrame(run_id=run_id or "", seq=seq, code="overflow", message=OVERFLOW)
    except _Closing as ended:
        yield ErrorFrame(run_id=run_id or "", seq=seq, code=ended.code, message=ended.message)


async def run_frames(
    subscription: Subscription, live: Live, run_id: str | None = None
) -> AsyncGenerator[Frame | None, None]:
    """The frames of one run that is already going (``None``: the first run seen), up to
    its ``turn.finished``: what a decision on a waiting approval continues."""
    seq = 0
    try:
        async with aclosing(_frames(subscription, live)) as frames:
            async for frame in frames:
                if frame is None:
                    yield None
                    continue
                seq = frame.seq
                if run_id is None and frame.run_id:
                    run_id = frame.run_id
                if frame.run_id == run_id:
                    yield frame
                    if isinstance(frame, TurnFinished):
                        return
    except BacklogOverflow:
        yield ErrorFrame(run_id=run_id or "", seq=seq, code="overflow", message=OVERFLOW)
    except _Closing as ended:
        yield ErrorFrame(run_id=run_id or "", seq=seq, code=ended.code, message=ended.message)


class _NotBegun(Exception):
    def __init__(self, frame: ErrorFrame) -> None:
        super().__init__(frame.message)
        self.frame = frame


class _Waiting:
    """A turn that may not have begun: what its stream shows until it does.

    The runtime publishes a turn's first frames (``turn.started``, its rows) just before
    the turn is handed over, so the frames of the latest run seen are kept: once the turn
    is known, those that are its own are sent first.
    """

    def __init__(self, started: asyncio.Future[TurnHandle], queued_id: str | None) -> None:
        self.started = started
        self.queued_id = queued_id
        self.since_start: list[Frame] = []
        self.wake = None if started.done() else started
        self.steered = False  # its message was sent with ``steer``: the frames after it count

    def see(self, frame: Frame | None) -> tuple[list[Frame | None], str | None]:
        """The frames to send now, and the turn's run_id once it has begun."""
        out: list[Frame | None] = []
        if frame is not None:
            if isinstance(frame, TurnStarted):
                self.since_start = [frame]
            elif self.since_start or (self.steered and not isinstance(frame, EPHEMERAL)):
                self.since_start.append(frame)  # (a running turn that takes a steered
                # message may show it before the sender learns which turn that is)
            if isinstance(frame, InputQueued) and frame.queued_id == self.queued_id:
                out.append(frame)
                self.steered = frame.steer
        if not self.started.done():
            return (out or [None]) if frame is None else out, None
        if self.started.cancelled() or self.started.exception() is not None:
            error = None if self.started.cancelled() else self.started.exception()
            raise _NotBegun(_not_begun(error, frame.seq if frame is not None else 0))
        run_id = self.started.result().run_id
        mine, self.since_start = [f for f in self.since_start if f.run_id == run_id], []
        return [*out, *mine], run_id


async def subscription_frames(
    subscription: Subscription, live: Live
) -> AsyncGenerator[Frame | None, None]:
    """Every frame the subscription carries from when it was opened, as it comes (a
    protocol that follows several turns, with the rows before its own start already
    shown, reads them all: A2A). Ends with an ``error`` frame as the other streams do."""
    seq = 0
    try:
        async with aclosing(_frames(subscription, live)) as frames:
            async for frame in frames:
                seq = frame.seq if frame is not None else seq
                yield frame
    except BacklogOverflow:
        yield ErrorFrame(run_id="", seq=seq, code="overflow", message=OVERFLOW)
    except _Closing as ended:
        yield ErrorFrame(run_id="", seq=seq, code=ended.code, message=ended.message)


async def stored_turn_frames(
    subscription: Subscription, store: Store, turn: Turn, live: Live, *, after_seq: int
) -> AsyncGenerator[Frame | None, None]:
    """``turn``'s frames from the store, then live (see the module's docstring). The
    subscription is opened before ``turn`` is read, so no frame falls in between."""
    from ostinato.server.results import turn_rows  # results imports the schemas

    run_id = turn.run_id
    yield TurnStarted(run_id=run_id, seq=after_seq, turn_id=turn.id, kind=turn.kind)
    last = after_seq
    for row in await turn_rows(store, turn, after_seq):
        last = row.seq or last
        yield MessageCommitted.of(run_id, last, row)
    if turn.status == "finished":
        yield _finished(turn, last)
        return
    try:
        async with aclosing(_frames(subscription, live)) as frames:
            async for frame in frames:
                if frame is None:
                    yield None
                elif frame.run_id == run_id and (
                    frame.seq > last or (frame.seq == last and not frame.durable)
                ):
                    yield frame
                    if isinstance(frame, TurnFinished):
                        return
    except BacklogOverflow:
        yield ErrorFrame(run_id=run_id, seq=last, code="overflow", message=OVERFLOW)
    except _Closing as ended:
        yield ErrorFrame(run_id=run_id, seq=last, code=ended.code, message=ended.message)


def _finished(turn: Turn, seq: int) -> TurnFinished:
    assert turn.stop_reason is not None
    return TurnFinished(
        run_id=turn.run_id,
        seq=seq,
        turn_id=turn.id,
        stop_reason=turn.stop_reason,
        state=STATE_AFTER[turn.stop_reason],
        metrics=turn.metrics,
        error=turn.error,
    )


async def conversation_frames(
    subscription: Subscription,
    store: Store,
    conversation_id: str,
    live: Live,
    *,
    after_seq: int,
    deltas: bool = True,
) -> AsyncGenerator[Frame | None, None]:
    replay = _Replay(store, conversation_id, after_seq)
    async for caught_up in _catch_up(replay, after_seq):
        yield caught_up
    try:
        async with aclosing(_frames(subscription, live)) as frames:
            async for frame in frames:
                if frame is None:
                    yield None
                elif not deltas and isinstance(frame, EPHEMERAL):
                    continue
                elif frame.seq > replay.last or (frame.seq == replay.last and not frame.durable):
                    # rows committed before this frame that no frame announced (a server
                    # that died between its commit and its frame; rows recovery wrote)
                    upto = frame.seq - 1 if frame.durable else frame.seq
                    if upto > replay.last:
                        async for message in replay.rows(upto):
                            yield message
                    if frame.durable:
                        replay.last = frame.seq
                    yield frame
    except BacklogOverflow:
        yield ErrorFrame(run_id="", seq=replay.last, code="overflow", message=OVERFLOW)
    except _Closing as ended:
        yield ErrorFrame(run_id="", seq=replay.last, code=ended.code, message=ended.message)


async def _catch_up(replay: _Replay, after_seq: int) -> AsyncIterator[Frame]:
    """The rows committed after ``after_seq``, then (for a client that resumes) a
    ``branch.changed`` if the branch may have moved since."""
    async for message in replay.rows(None):
        yield message
    if after_seq > 0:
        moved = await _moved_since(replay.store, replay.conversation_id, after_seq, replay.last)
        if moved is not None:
            yield moved


async def _moved_since(
    store: Store, conversation_id: str, after_seq: int, last: int
) -> BranchChanged | None:
    """A ``branch.changed`` for a client that resumes after ``after_seq``, if the branch
    may have moved since it last saw the stream (a move writes no row to replay)."""
    conversation = await store.get_conversation(conversation_id)
    if conversation is None or conversation.branch.whole:
        return None
    branch = conversation.branch
    if branch.since < after_seq:
        return None  # it has seen rows written after the move: it knows
    ranges = [list(r) for r in branch.ranges]
    return BranchChanged(
        run_id="", seq=max(last, branch.since), tip=branch.tip, ranges=ranges, since=branch.since
    )


class _Replay:
    """The committed rows after ``last`` as ``message`` frames, read from the store."""

    def __init__(self, store: Store, conversation_id: str, last: int) -> None:
        self.store, self.conversation_id, self.last = store, conversation_id, last
        self.runs: dict[str, str] = {}

    async def rows(self, upto: int | None) -> AsyncIterator[MessageCommitted]:
        """The rows after ``last`` (up to seq ``upto``), moving ``last`` past each."""
        async for row in _stored_rows(self.store, self.conversation_id, self.last):
            if upto is not None and (row.seq or 0) > upto:
                return
            self.last = row.seq or self.last
            if row.turn_id and row.turn_id not in self.runs:  # a turn newer than we know
                turns = await self.store.list_turns(self.conversation_id)
                self.runs = {turn.id: turn.run_id for turn in turns}
                self.runs.setdefault(row.turn_id, "")  # no record of it: do not look again
            run_id = self.runs.get(row.turn_id or "", "")
            yield MessageCommitted.of(run_id, self.last, row)


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
