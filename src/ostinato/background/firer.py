"""The poller: finds due schedules, claims each for this process with a lease, and
fires it in two stages, exactly once.

Each tick is one claim (``ScheduleStore.claim_schedules``: one indexed query on
``wake_at``; ``FOR UPDATE SKIP LOCKED`` on PostgreSQL). Each claimed schedule is then
driven by the firing decision (``firing.next_step``): the firer reads what the store
shows of the slot (``Seen``), performs the step, and looks again, every change of state
a compare-and-set on this process's holder:

- A firing that starts a turn (a prompt's stage one, a trigger's or a run's hand-over)
  counts it
  in the owner's turns a minute (``turns``, the per-owner limits): past them it waits.
- ``claimed -> ran``: the work runs. A prompt's stage one is a background turn in its
  own conversation (``stage_one``), awaited while the lease is renewed; its answer is
  kept in the schedule (``result``). A reminder or a trigger needs no work.
- ``ran``: stage two hands the result on in the conversation (``handoff``) and the
  turn that answers it is awaited (a reply a crash cut off is asked for again, once).
- ``ran -> delivered`` (a one-shot), or back to ``due`` at the next slot after now (a
  recurring one: slots missed while every server was down fire once, not once each;
  ``late_seconds`` says how late the slot fired).

A process killed at any point leaves the schedule held until its lease runs out; then
another (or the same after a restart) claims it in the state it was left in, and the
decision picks up from what the store shows. The crash tests stop a process at the
kill points (``KILL_ENV``): ``started`` (stage one's turn began, the schedule still
claimed), ``ran`` (moved to ran, nothing handed on), ``handed`` (the row is in the
conversation and its turn began, the schedule still ran).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, assert_never

from ostinato import observe
from ostinato.background import handoff, stage_one
from ostinato.background.firing import (
    Advance,
    AwaitStageOne,
    AwaitStageTwo,
    Hand,
    Ran,
    Seen,
    StageOne,
    StartStageOne,
    WaitForTurn,
    next_step,
)
from ostinato.background.schedules import Schedules
from ostinato.background.stage_one import MARKER as MARKER
from ostinato.background.when import Kind, next_fire, zone_named
from ostinato.errors import NotFound
from ostinato.identity.limits import Limiter
from ostinato.ids import new_id
from ostinato.store.schedules import Schedule
from ostinato.submissions import TurnHandle

log = logging.getLogger(__name__)

KILL_ENV = "OSTINATO_FAULT_SCHEDULE_KILL"  # crash tests: SIGKILL this process at that step
KILL_POINTS = ("started", "ran", "handed")
RECHECK_S = 5.0  # stage one runs elsewhere: look again this much later
MAX_STEPS = 12  # a firing's steps in one go (each is durable; the rest waits for the lease)


def kill_point(env: Mapping[str, str]) -> Callable[[str], None] | None:
    """The crash tests' kill point: with ``KILL_ENV`` naming one of ``KILL_POINTS``, the
    process SIGKILLs itself there, as a crash would stop it."""
    step = env.get(KILL_ENV)
    if not step:
        return None

    def kill(at: str) -> None:
        if at == step:
            os.kill(os.getpid(), signal.SIGKILL)

    return kill


class Firer:
    """Fires ``schedules``' due items into ``runtime``'s conversations as ``holder`` (by
    default an id of its own: a schedule's lease is apart from the server's); ``clock``
    is now, ``kill`` a hook the crash tests use to stop between two steps (it gets the
    step's name); ``started`` is called with each stage-one turn as it begins."""

    def __init__(
        self,
        runtime: Any,
        schedules: Schedules,
        holder: str | None = None,
        *,
        clock: Callable[[], datetime] | None = None,
        batch: int = 20,
        kill: Callable[[str], None] | None = None,
        started: Callable[[Schedule, TurnHandle], None] | None = None,
        turns: Limiter | None = None,
    ) -> None:
        self.runtime, self.schedules = runtime, schedules
        self.holder = holder or f"firer_{new_id()}"
        self.store = schedules.store
        self.clock = clock or schedules.clock
        self.lease = timedelta(seconds=schedules.settings.lease_seconds)
        self.batch, self.kill = batch, kill or (lambda step: None)
        self.started = started or (lambda schedule, handle: None)
        self.turns = turns  # the owners' turns a minute, which firings count in
        self._stopped = asyncio.Event()
        self._firing: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        """Tick every ``poll_seconds`` until ``stop`` (at once again after a tick that
        took all it could: more may be due). Each firing runs on in a task of its own
        (a prompt's stage one takes a while), at most ``batch`` at once: a tick claims
        only as many as are free; ``stop`` cancels those still going."""
        poll = self.schedules.settings.poll_seconds
        try:
            while not self._stopped.is_set():
                free = self.batch - len(self._firing)
                try:
                    if free > 0 and len(await self.claim(free, spawn=True)) >= free:
                        continue
                except Exception:  # the store is away: try again at the next tick
                    log.exception("schedules: a tick failed")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopped.wait(), poll)
        finally:
            for task in list(self._firing):
                task.cancel()
            await asyncio.gather(*self._firing, return_exceptions=True)

    def stop(self) -> None:
        self._stopped.set()

    async def tick(self) -> list[Schedule]:
        """Claim what is due now and fire each to its end (stage one included), one
        after another; what was claimed."""
        return await self.claim(self.batch, spawn=False)

    async def claim(self, limit: int, *, spawn: bool) -> list[Schedule]:
        """Claim up to ``limit`` due schedules and fire them: each in a task of its own
        (``spawn``), or one after another."""
        now = self.clock()
        claimed = await self.store.claim_schedules(self.holder, now, self.lease, limit)
        for schedule in claimed:
            if not spawn:
                await self._fire_logged(schedule, now)
                continue
            task = asyncio.create_task(self._fire_logged(schedule, now))
            self._firing.add(task)
            task.add_done_callback(self._firing.discard)
        return claimed

    async def _fire_logged(self, schedule: Schedule, now: datetime) -> None:
        try:
            with observe.job(
                "schedule",
                conversation_id=schedule.conversation_id,
                owner=schedule.owner,
                id=schedule.id,
                mode=schedule.mode,
            ):  # a trace of its own; the turns it starts link to it (``observe.caused``)
                await self.fire(schedule, now)
        except NotFound:  # its conversation is gone: nothing to deliver to, ever
            log.warning("schedules: %s's conversation is gone; dropped", schedule.id)
            await self.store.delete_schedule(schedule.owner, schedule.id)
        except Exception:  # left held: taken again once its lease runs out
            log.exception("schedules: firing %s failed", schedule.id)

    async def fire(self, schedule: Schedule, now: datetime) -> None:
        """Drive one held schedule through the firing decision until it is delivered,
        waits, or is no longer this process's."""
        if schedule.state == "claimed" and schedule.attempts == 0 and schedule.run_id is None:
            late = max(0.0, (now - (schedule.next_fire or now)).total_seconds())
            schedule = dataclasses.replace(schedule, late_seconds=late)
        for _ in range(MAX_STEPS):
            step = next_step(schedule, await self._seen(schedule))
            if await self._held_back(schedule, step):
                return
            match step:
                case StartStageOne(attempt=attempt):
                    moved = await self._stage_one(schedule, attempt)
                case AwaitStageOne(run_id=run_id):
                    cid = stage_one.conversation_id(schedule)
                    moved = await self._await_elsewhere(schedule, cid, run_id)
                case Ran(result=result, run_id=run_id):
                    run_id = run_id or f"sch_{new_id()}"
                    moved = await self._move(schedule, state="ran", result=result, run_id=run_id)
                    self.kill("ran")
                case WaitForTurn():
                    await self._move(schedule, lease_until=self.clock() + timedelta(seconds=1))
                    return
                case Hand():
                    moved = await self._stage_two(schedule)
                case AwaitStageTwo(run_id=run_id):
                    cid = schedule.conversation_id
                    moved = await self._await_elsewhere(schedule, cid, run_id)
                case Advance():
                    await self.store.move_schedule(self._after(schedule), self.holder)
                    return
                case _:
                    assert_never(step)
            if moved is None:  # no longer ours, or left for later
                return
            schedule = moved

    async def _seen(self, schedule: Schedule) -> Seen:
        """What the store (and this process) shows of the schedule's slot."""
        store = self.runtime.store
        if schedule.state == "ran":
            two = await handoff.seen(store, schedule)
            return Seen(two, self.runtime.busy(schedule.conversation_id))
        if schedule.mode != "prompt":
            return Seen()
        return Seen(stage_one=await stage_one.seen(store, schedule))

    async def _stage_two(self, schedule: Schedule) -> Schedule | None:
        """Hand the result on, then await the turn that answers it (renewing the lease)."""
        hands = (await handoff.seen(self.runtime.store, schedule)).hands
        handle = await handoff.hand(self.runtime, schedule, hands)
        if handle is not None:
            observe.caused(handle.turn)
        self.kill("handed")
        return schedule if handle is None else await self._await(schedule, handle)

    async def _stage_one(self, schedule: Schedule, attempt: int) -> Schedule | None:
        """Begin an attempt, record it, and await its end (renewing the lease)."""
        handle = await stage_one.start(self.runtime, schedule, attempt)
        observe.caused(handle.turn)
        try:
            self.started(schedule, handle)
            moved = await self._move(schedule, attempts=attempt, run_id=handle.run_id)
            self.kill("started")
            if moved is not None:
                moved = await self._await(moved, handle)
            return moved
        finally:
            stage_one.done(self.runtime, schedule)

    async def _await(self, schedule: Schedule, handle: TurnHandle) -> Schedule | None:
        """Wait for a stage-one turn of this process; renew the lease meanwhile."""
        every = max(1.0, self.lease.total_seconds() / 3)
        ending = asyncio.ensure_future(handle.result())
        ending.add_done_callback(lambda f: f.cancelled() or f.exception())  # read below
        try:
            while not ending.done():
                await asyncio.wait({ending}, timeout=every)
                if not ending.done():
                    renewed = await self._move(schedule, lease_until=self.clock() + self.lease)
                    if renewed is None:
                        return None
                    schedule = renewed
        finally:
            if not ending.done():
                ending.cancel()
        return schedule

    async def _await_elsewhere(
        self, schedule: Schedule, cid: str, run_id: str | None
    ) -> Schedule | None:
        """A stage's turn runs in ``cid`` (or waits to): here, await it; elsewhere, look
        again later (if its process died, recovery closes its turn, and the decision
        goes on from how it ended)."""
        handle = self.runtime.running(cid)
        if handle is not None and run_id is not None and handle.run_id == run_id:
            return await self._await(schedule, handle)
        later = self.clock() + timedelta(seconds=RECHECK_S)
        await self._move(schedule, lease_until=later)
        return None

    async def _held_back(self, schedule: Schedule, step: object) -> bool:
        """Whether ``step`` begins a turn (a prompt's stage one, a trigger's or a run's
        hand-over) and the owner has had its turns this minute (these count like its
        own): the firing then waits, held, until one is free (its lease moved there)."""
        begins = isinstance(step, StartStageOne) or (
            isinstance(step, Hand) and schedule.mode in ("trigger", "run")
        )
        if not begins or self.turns is None:
            return False
        wait = await self.turns.count_turn(schedule.owner)
        if wait is None:
            return False
        await self._move(schedule, lease_until=self.clock() + timedelta(seconds=wait))
        return True

    async def _move(self, schedule: Schedule, **changes: Any) -> Schedule | None:
        """Store ``schedule`` with ``changes`` while this process holds it; None if not."""
        moved = dataclasses.replace(schedule, **changes)
        return moved if await self.store.move_schedule(moved, self.holder) else None

    def _after(self, schedule: Schedule) -> Schedule:
        now = self.clock()
        done = dataclasses.replace(
            schedule, fired=schedule.fired + 1, last_fired_at=now, holder=None, lease_until=None
        )
        if schedule.kind == "once":
            return dataclasses.replace(done, state="delivered", next_fire=None)
        kind: Kind = schedule.kind  # type: ignore[assignment]
        slot = schedule.next_fire or now
        following = next_fire(kind, schedule.spec, max(slot, now), zone_named(schedule.zone))
        cleared = dataclasses.replace(done, run_id=None, result=None, attempts=0)
        return dataclasses.replace(cleared, state="due", next_fire=following)


__all__ = ["KILL_ENV", "KILL_POINTS", "MARKER", "Firer", "StageOne", "kill_point"]
