"""A message steered on this server, taken by a turn that runs on another one.

With several servers on one database, the running turn reads the queue from the store at
each step boundary (``loop.steering``), so a message sent here with ``steer`` may be
taken by a turn of another process. Its sender follows that turn as it would a local
one: ``follow`` watches the conversation (the subscription the message was sent under,
opened before its queue write) for the row the turn wrote for it (its metadata carries
the queued id, ``loop.steering.QUEUED_ID``), then hands the sender a ``TurnHandle`` of
that turn whose task waits for the turn's end and reads its result from the store.

Frames may be lost between servers (a dropped relay connection), so every ``CHECK_S``
the store is read too: the recent rows for the steered one, then the turn's row for its
end. A submission that is done otherwise (a local turn took it, it began here, it was
withdrawn, the server shuts down) stops the watch. If the watch missed the take (frames
lost, and this server's worker reached the message first), ``taken_late`` finds the row
as the message would begin here, and its sender follows the turn all the same.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from ostinato.bus import BacklogOverflow, LocalBus, Subscription
from ostinato.frames import Frame, MessageCommitted, TurnFinished
from ostinato.loop.driver import TurnResult
from ostinato.loop.steering import QUEUED_ID
from ostinato.messages import Message
from ostinato.store.base import QueuedInput, Store, Turn
from ostinato.submissions import Submission, TurnHandle
from ostinato.turns import Workers

CHECK_S = 2.0  # how often the store is read while frames say nothing
LOOK_BACK = 50  # recent rows read to find the steered row
PAGE = 200

_following: set[asyncio.Future[Any]] = set()  # kept referenced while they run


def follow(store: Store, workers: Workers, subscription: Subscription, sub: Submission) -> None:
    """Watch for a turn elsewhere taking ``sub``'s steered message (see the docstring);
    the subscription is closed when the watch ends."""
    task = asyncio.ensure_future(_follow(store, workers, subscription, sub))
    _following.add(task)
    task.add_done_callback(_following.discard)


async def _follow(
    store: Store, workers: Workers, subscription: Subscription, sub: Submission
) -> None:
    queued = sub.queued
    assert queued is not None
    handed = False
    try:
        row = await _steered_row(store, subscription, sub, queued)
        turn = await store.get_turn(row.turn_id) if row and row.turn_id else None
        if row is None or turn is None or sub.started.done():
            return
        worker = workers.get(queued.conversation_id)
        if worker is not None and sub in worker.pending:
            worker.pending.remove(sub)  # taken: it will not begin a turn here
        end = asyncio.ensure_future(_end(store, subscription, turn, row.seq or 1))
        _following.add(end)
        end.add_done_callback(_following.discard)
        sub.started.set_result(TurnHandle(turn, (), end))
        handed = True  # ``_end`` closes the subscription
    finally:
        if not handed:
            subscription.close()


async def _steered_row(
    store: Store, subscription: Subscription, sub: Submission, queued: QueuedInput
) -> Message | None:
    """The row a turn wrote for the steered message, or None once ``sub`` is done."""
    frames: Subscription | None = subscription
    while not sub.started.done():
        frame = await _next(frames, sub.started)
        if isinstance(frame, BacklogOverflow):
            frames = None  # the store alone, from now on
        elif isinstance(frame, MessageCommitted):
            if frame.message.metadata.get(QUEUED_ID) == queued.id:
                return frame.message
        elif frame is None and (row := await _recent_row(store, queued)) is not None:
            return row
    return None


async def _recent_row(store: Store, queued: QueuedInput) -> Message | None:
    """The steered message's row, if it is among the conversation's recent rows."""
    window = await store.window(queued.conversation_id, limit=LOOK_BACK)
    return next((r for r in window.rows if r.metadata.get(QUEUED_ID) == queued.id), None)


async def taken_late(store: Store, bus: LocalBus, queued: QueuedInput) -> TurnHandle | None:
    """For a steered message found gone as its turn would begin here (the watch missed
    the take): the handle of the turn that took it, if its row is among the recent ones."""
    row = await _recent_row(store, queued) if queued.steer else None
    turn = await store.get_turn(row.turn_id) if row is not None and row.turn_id else None
    if row is None or turn is None:
        return None
    end = asyncio.ensure_future(
        _end(store, bus.subscribe(turn.conversation_id), turn, row.seq or 1)
    )
    _following.add(end)
    end.add_done_callback(_following.discard)
    return TurnHandle(turn, (), end)


async def _next(
    frames: Subscription | None, stop: asyncio.Future[TurnHandle]
) -> Frame | BacklogOverflow | None:
    """The next frame, ``BacklogOverflow`` when the subscription fell behind, or None
    after ``CHECK_S`` of silence (or when ``stop`` is done)."""
    getter = asyncio.ensure_future(frames.__anext__()) if frames is not None else None
    waiting: set[asyncio.Future[Any]] = {stop} if getter is None else {stop, getter}
    await asyncio.wait(waiting, timeout=CHECK_S, return_when=asyncio.FIRST_COMPLETED)
    if getter is None:
        return None
    if not getter.done():
        getter.cancel()
        with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, BacklogOverflow):
            await getter
        return None
    try:
        return getter.result()
    except BacklogOverflow as overflow:
        return overflow
    except StopAsyncIteration:
        return BacklogOverflow("the subscription ended")


async def _end(
    store: Store, subscription: Subscription, turn: Turn, steered_seq: int
) -> TurnResult:
    """The turn's result once it has ended (its ``turn.finished`` frame, or its row read
    every ``CHECK_S``): its rows from the steered one on, read from the store."""
    never: asyncio.Future[TurnHandle] = asyncio.get_running_loop().create_future()
    frames: Subscription | None = subscription
    try:
        done = await _finished(store, turn)  # (it may have ended already)
        while not done:
            frame = await _next(frames, never)
            if isinstance(frame, BacklogOverflow):
                frames = None
            elif isinstance(frame, TurnFinished):
                done = frame.turn_id == turn.id
            elif frame is None:
                done = await _finished(store, turn)
    finally:
        subscription.close()
    ended = await store.get_turn(turn.id)
    assert ended is not None and ended.stop_reason is not None
    rows = await _rows(store, ended, steered_seq - 1)
    return TurnResult(ended.id, ended.run_id, ended.stop_reason, ended.metrics, rows, ended.error)


async def _finished(store: Store, turn: Turn) -> bool:
    stored = await store.get_turn(turn.id)
    return stored is not None and stored.status == "finished"


async def _rows(store: Store, turn: Turn, after_seq: int) -> list[Message]:
    """The turn's rows after ``after_seq``, up to the first row of a later turn."""
    found: list[Message] = []
    while True:
        page = await store.list_messages(turn.conversation_id, after_seq=after_seq, limit=PAGE)
        for row in page:
            if row.turn_id is not None and row.turn_id != turn.id:
                return found
            if row.turn_id == turn.id and row.metadata.get("kind") != "summary":
                found.append(row)
        if len(page) < PAGE:
            return found
        after_seq = page[-1].seq or after_seq
