"""Arbitration: one active turn per conversation, and what waits behind it.

Each busy conversation has one ``Worker``: a task that begins the turns of its pending
``Submission``s one after another, queued messages in the order of their store position.
A submission to an idle conversation starts a worker and runs at once; to a busy one it
is stored first (the store's queue, so nothing accepted is lost in a crash) and then, by
policy:

- ``queue`` (default): runs after the turns before it;
- ``supersede``: the running turn is cancelled (its teardown awaited), then it runs;
- ``reject``: refused with ``Conflict`` (nothing stored);
- ``steer``: the running turn takes it at its next step boundary (``loop.steering``);
  its sender then follows that turn (``Worker.steered``). If no step takes it, it runs
  after the turn like a queued one.

A busy worker holds one admission slot (``ostinato.admission``) from its first turn
until it winds down: whoever starts a worker for a new input takes the slot first (so a
full process refuses before anything is stored), and a worker started for input that is
stored already takes one itself, waiting in the same line as long as it takes. Each
turn is begun in one of the process's places for beginning turns (``Admission.beginning``),
so a burst of inputs begins a few turns at a time.

At shutdown ``Workers.drain`` begins no new turn (waiting submissions are refused with
``ShuttingDown``; a queued message stays in the store's queue), gives running turns a
grace, then cancels the rest and waits for each to record its end.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeAlias

from ostinato.admission import Admission, Held, Release
from ostinato.approvals import Approval
from ostinato.errors import ShuttingDown
from ostinato.handover import others_alive
from ostinato.holds import Holds
from ostinato.ids import new_id
from ostinato.store.base import QueuedInput, Turn
from ostinato.submissions import (
    ApprovalOutcome,
    Begin,
    Continued,
    NewMessage,
    Submission,
    TurnHandle,
)

Policy: TypeAlias = Literal["queue", "supersede", "reject", "steer"]
POLICIES: tuple[str, ...] = ("queue", "supersede", "reject", "steer")

QUEUED_KEPT = (
    "the server is shutting down before this message's turn began; the message stays in "
    "the conversation's queue and runs when a server picks it up (watch /events): do not "
    "send it again"
)
NOT_BEGUN = "the server is shutting down and begins no new turn; send this again shortly"
RETRY_AFTER_S = 5.0  # what a refused request is told to wait (a restart takes seconds)
TEARDOWN_S = 15.0  # how long a shutdown waits for cancelled turns to record their end


def refuse(submission: Submission) -> None:
    """Tell a submission's sender that its turn will not begin here (shutdown)."""
    if submission.started.done():
        return
    if submission.queued is not None:
        submission.started.set_exception(ShuttingDown(QUEUED_KEPT))
    else:
        submission.started.set_exception(ShuttingDown(NOT_BEGUN, retry_after=RETRY_AFTER_S))
    submission.started.exception()  # retrieved: nobody may be waiting for it


class Worker:
    """Runs the turns of one conversation, one at a time.

    Queued messages wait in the order of their store ``position`` (the order each sender
    was told), whatever order their writes finished in: a message being queued reserves
    a place (``reserve``) before its write and takes it when the write is done
    (``settle``); the worker begins nothing while a place is reserved, so one whose write
    is slower never finds the one behind it already running.
    """

    def __init__(self, conversation_id: str, begin: Begin) -> None:
        self.conversation_id = conversation_id
        self.pending: deque[Submission] = deque()
        self.current: TurnHandle | None = None
        self.starting = False  # a turn is being begun (its rows written, its task made)
        self.stopping = False  # shutting down: no more turns begin
        self.stopped = asyncio.Event()  # set with ``stopping``
        self.enqueuing = 0  # messages whose queue write is in flight
        self._begun = asyncio.Event()  # set whenever no turn is being begun
        self._settled = asyncio.Event()  # set whenever no queue write is in flight
        self._settled.set()
        self._begin = begin
        self.task: asyncio.Task[None] | None = None
        self.slot: Release | None = None  # its admission slot, while it has one
        self.joining: list[Submission] = []  # steered into a turn not yet ``current``

    @property
    def idle(self) -> bool:
        """Nothing runs and nothing waits: the worker is winding down."""
        return (
            not self.pending
            and not self.starting
            and not self.enqueuing
            and (self.current is None or self.current.task.done())
        )

    async def queue(self, store: Callable[[], Awaitable[Submission]]) -> Submission:
        """Hold a place while ``store`` writes a message to the store's queue; its
        submission then waits in the order of its store position."""
        self.reserve()
        submission = None
        try:
            submission = await store()
            return submission
        finally:
            self.settle(submission)

    def reserve(self) -> None:
        """A message is being written to the store's queue: hold its place."""
        self.enqueuing += 1
        self._settled.clear()

    def settle(self, submission: Submission | None) -> None:
        """The queue write ended: its submission takes its place (None: the write failed)."""
        self.enqueuing -= 1
        if not self.enqueuing:
            self._settled.set()
        if submission is None:
            return
        if self.stopping:
            refuse(submission)
        else:
            self.put(submission)

    def put(self, submission: Submission) -> None:
        """Add a submission: a queued message before any waiting one with a later store
        position, anything else at the end."""
        queued = submission.queued
        if queued is not None:
            for index, waiting in enumerate(self.pending):
                if waiting.queued is not None and waiting.queued.position > queued.position:
                    self.pending.insert(index, submission)
                    return
        self.pending.append(submission)

    async def run(self) -> None:
        try:
            while (submission := await self._next()) is not None:
                handle = await self._start(submission)
                if handle is None:
                    continue
                self.current = handle
                self._join(handle)
                await asyncio.wait([handle.task])
                self.current = None  # (not in a finally: cancellation needs it below)
        except asyncio.CancelledError:
            current = self.current
            if current is not None and not current.task.done():
                current.task.cancel()
                await asyncio.wait([current.task])
            self.stop()
            raise

    def steered(self, queued_ids: Sequence[str]) -> None:
        """The running turn took these queued inputs at a step boundary: their
        submissions wait no more, and their senders follow that turn."""
        ids = set(queued_ids)
        for submission in [s for s in self.pending if s.queued and s.queued.id in ids]:
            self.pending.remove(submission)
            self.joining.append(submission)
        if self.current is not None and not self.current.task.done():
            self._join(self.current)

    def _join(self, handle: TurnHandle) -> None:
        joining, self.joining = self.joining, []
        for submission in joining:
            if not submission.started.done():
                submission.started.set_result(handle)

    async def _next(self) -> Submission | None:
        """The next submission to begin, once no queue write is in flight; None when
        nothing waits or the worker stops."""
        while self.enqueuing and not self.stopping:
            await self._settled.wait()
        if self.stopping or not self.pending:
            return None
        return self.pending.popleft()

    async def _start(self, submission: Submission) -> TurnHandle | None:
        """Begin the submission's turn; None if it could not begin (its sender is told)."""
        self.starting = True
        self._begun.clear()
        try:
            handle = await self._begin(self.conversation_id, submission)
        except asyncio.CancelledError:
            refuse(submission)
            raise
        except Exception as exc:  # the input could not start a turn: tell its sender
            if not submission.started.done():
                submission.started.set_exception(exc)
            return None
        finally:
            self.starting = False
            self._begun.set()
        submission.started.set_result(handle)
        return handle

    def stop(self) -> None:
        """Begin no more turns; each waiting submission's sender is told (a queued
        message stays in the store's queue for the next server to run)."""
        self.stopping = True
        self.stopped.set()
        self._settled.set()
        while self.pending:
            refuse(self.pending.popleft())

    async def cancel_current(self) -> Turn | None:
        """Cancel the running turn and wait for its teardown; the turn, if there was one.
        A turn being begun is waited for, then cancelled."""
        if self.starting:
            await self._begun.wait()
        current = self.current
        if current is None or current.task.done():
            return None
        current.task.cancel()
        await asyncio.wait([current.task])
        return current.turn

    async def finish(self) -> None:
        """Stop, cancel the running turn (its teardown awaited), and wait for the end."""
        self.stop()
        await self.cancel_current()
        if self.task is not None:
            await asyncio.wait([self.task])


class Workers:
    """The workers of every busy conversation in this process."""

    def __init__(self, begin: Begin, admission: Callable[[], Admission] = Admission) -> None:
        self._begin = begin
        self._admission = admission  # the process's bound (read when a worker starts)
        self._workers: dict[str, Worker] = {}
        self.draining = False  # shutting down: no new turns
        self.holds: Holds | None = None  # with several servers (``ostinato.holds``)
        self.handing = asyncio.Event()  # set: running turns hand over at their next step

    def get(self, conversation_id: str) -> Worker | None:
        return self._workers.get(conversation_id)

    def busy(self, conversation_id: str) -> bool:
        """A turn runs or waits to (a worker winding down does not count)."""
        worker = self._workers.get(conversation_id)
        return worker is not None and not worker.idle

    async def slot_for(self, conversation_id: str) -> Held:
        """An admission slot for new input to this conversation (``Overloaded`` when none
        comes free in time), or none when its worker is busy (it holds one)."""
        if self.busy(conversation_id):
            return Held()
        return Held(await self._admission().enter())

    def add(
        self, conversation_id: str, submission: Submission, slot: Release | None = None
    ) -> Worker | None:
        """Queue a submission, starting the conversation's worker if it is idle (with
        ``slot``, the admission slot its sender took, or one it waits for); None (and
        the sender told) when shutting down. A slot that is not needed is given back."""
        if self.draining:
            refuse(submission)
            if slot is not None:
                slot()
            return None
        worker = self._workers.get(conversation_id)
        if worker is None:
            worker = Worker(conversation_id, self._paced)
            worker.slot = slot
            self._workers[conversation_id] = worker
            worker.put(submission)
            worker.task = asyncio.create_task(self._run(worker), name=f"worker-{conversation_id}")
        else:
            worker.put(submission)
            if slot is not None:  # the worker there holds one already (or will)
                slot()
        return worker

    def open(self, conversation_id: str) -> Worker:
        """The conversation's worker, started with nothing to run yet: a message about to
        be queued (``Worker.queue``) holds it open. For a conversation another server
        runs: the worker waits for its hold, then runs what was queued here."""
        worker = self._workers.get(conversation_id)
        if worker is None:
            worker = Worker(conversation_id, self._paced)
            self._workers[conversation_id] = worker
            worker.task = asyncio.create_task(self._run(worker), name=f"worker-{conversation_id}")
        return worker

    async def _run(self, worker: Worker) -> None:
        """Run the worker, holding its conversation while it does when several servers
        share the store (``ostinato.holds``)."""
        cid, holds, token = worker.conversation_id, self.holds, new_id()
        try:
            if holds is None or await holds.claim(cid, token, worker.stopped):
                if worker.slot is None:
                    worker.slot = await _slot(self._admission(), worker.stopped)
                await worker.run()
            else:
                worker.stop()
        finally:
            if self._workers.get(cid) is worker:
                del self._workers[cid]
            if worker.slot is not None:
                worker.slot()
            if holds is not None:
                await holds.release(cid, token)

    async def _paced(self, conversation_id: str, submission: Submission) -> TurnHandle:
        """Begin a turn once one of the process's places for beginning turns is free
        (``Admission.beginning``)."""
        async with self._admission().beginning():
            return await self._begin(conversation_id, submission)

    def __len__(self) -> int:
        return len(self._workers)

    def withdrawn(self, conversation_id: str, queued_id: str, why: Exception) -> None:
        """A waiting message was withdrawn: its sender here (if any) is told ``why``."""
        worker = self._workers.get(conversation_id)
        pending = worker.pending if worker is not None else deque[Submission]()
        for submission in [s for s in pending if s.queued and s.queued.id == queued_id]:
            pending.remove(submission)
            if not submission.started.done():
                submission.started.set_exception(why)
                submission.started.exception()  # retrieved: nobody may wait for it

    def steered(self, conversation_id: str, items: Sequence[QueuedInput]) -> None:
        """A turn of this conversation took ``items`` at a step boundary
        (``loop.steering``): what waited for them here follows that turn."""
        worker = self._workers.get(conversation_id)
        if worker is not None:
            worker.steered([item.id for item in items])

    def refuse_new(self) -> None:
        """``ShuttingDown`` while draining: no new turn begins."""
        if self.draining:
            raise ShuttingDown(NOT_BEGUN, retry_after=RETRY_AFTER_S)

    async def take_over(
        self,
        decided: Sequence[Approval],
        queued: Sequence[QueuedInput],
        handed: Sequence[Turn] = (),
    ) -> None:
        """Run what recovery took over: each turn handed over (``ostinato.handover``),
        first in its conversation's line; each decision in a new turn, begun before this
        returns (nobody sees a decided call without a result in a conversation that is
        not running), then each queued message in its conversation's queue."""
        for turn in handed:
            self.add(turn.conversation_id, Submission(Continued(turn)))
        continued = [Submission(ApprovalOutcome(a)) for a in decided]
        for approval, submission in zip(decided, continued, strict=True):
            self.add(approval.conversation_id, submission)
        await asyncio.gather(*(s.started for s in continued), return_exceptions=True)
        for item in queued:
            message = NewMessage(item.message, item.client_message_id, item)
            self.add(item.conversation_id, Submission(message))

    async def drain(self, grace: float, hurry: asyncio.Event | None = None) -> bool:
        """Shut down: begin no new turn (what waits is refused), give the running turns
        ``grace`` seconds (cut short when ``hurry`` is set) to end by themselves (or, with
        another server live on the store, to hand over at their next step:
        ``ostinato.handover``), then cancel the rest and wait (at most ``TEARDOWN_S``)
        for each to record its end. Whether turns were asked to hand over."""
        self.draining = True
        holds = self.holds if grace > 0 and self._workers else None
        if holds is not None and await others_alive(holds.store, holds.holder):
            self.handing.set()
        workers = list(self._workers.values())
        for worker in workers:
            worker.stop()
        tasks = [w.task for w in workers if w.task is not None]
        if tasks and grace > 0:
            stop: list[asyncio.Future[Any]] = [asyncio.ensure_future(asyncio.wait(tasks))]
            if hurry is not None:
                stop.append(asyncio.ensure_future(hurry.wait()))
            await asyncio.wait(stop, timeout=grace, return_when=asyncio.FIRST_COMPLETED)
            for waiter in stop:
                waiter.cancel()
        left = [asyncio.ensure_future(w.finish()) for w in workers if w.task and not w.task.done()]
        if left:
            await asyncio.wait(left, timeout=TEARDOWN_S)
        for task in (w.task for w in workers):  # a teardown that hangs is abandoned
            if task is not None and not task.done():
                task.cancel()
        return self.handing.is_set()

    async def close(self) -> None:
        await self.drain(0.0)


async def _slot(admission: Admission, stopped: asyncio.Event) -> Release | None:
    """An admission slot for input that is stored already (never refused: it waits),
    or None when the worker is stopped first."""
    entering = asyncio.ensure_future(admission.enter(bounded=False))
    stopping = asyncio.ensure_future(stopped.wait())
    await asyncio.wait([entering, stopping], return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if entering.done():
        return entering.result()
    entering.cancel()
    await asyncio.wait([entering])
    if not entering.cancelled() and entering.exception() is None:
        entering.result()()  # it came just as the worker stopped
    return None
