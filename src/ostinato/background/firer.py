"""The poller: finds due schedules, claims each for this process with a lease, and
delivers it exactly once.

Each tick is one claim (``ScheduleStore.claim_schedules``: one indexed query on
``wake_at``; ``FOR UPDATE SKIP LOCKED`` on PostgreSQL), then each claimed schedule moves
on in the store step by step, every step a compare-and-set on this process's holder:

1. ``claimed -> ran``: its trigger goes into the conversation. A reminder's text is
   stored as an assistant row (no model call) and published as a ``message`` frame
   whose ``run_id`` is the firing's own; a prompt is submitted as a hidden user row
   (``metadata.schedule``), so a normal turn answers it and the reply streams on every
   surface while the prompt stays out of the chat view. Before writing, the
   conversation's newest rows and queue are read for this slot's marker: a process
   that died after writing and before moving on is not doubled by the one that takes
   over.
2. ``ran -> delivered`` (a one-shot), or back to ``due`` at the next slot after now (a
   recurring one: slots missed while every server was down fire once, not once each;
   ``late_seconds`` says how late the slot fired).

A process killed at any point leaves the schedule held until its lease runs out; then
another (or the same after a restart) claims it in the state it was left in.
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
from typing import Any

from ostinato.background.schedules import Schedules
from ostinato.background.when import Kind, next_fire, zone_named
from ostinato.errors import NotFound
from ostinato.frames import MessageCommitted
from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock
from ostinato.store.base import AppendMessage
from ostinato.store.schedules import Schedule

log = logging.getLogger(__name__)

KILL_ENV = "OSTINATO_FAULT_SCHEDULE_KILL"  # crash tests: SIGKILL this process at that step
MARKER = "schedule"  # metadata key of a firing's row: "<schedule id>:<slot number>"
LOOK_BACK = 50  # rows read for a marker before writing one
LATE_NOTE_S = 60.0  # a prompt this late says so


def marker(schedule: Schedule) -> str:
    return f"{schedule.id}:{schedule.fired}"


def kill_point(env: Mapping[str, str]) -> Callable[[str], None] | None:
    """The crash tests' kill point: with ``KILL_ENV`` naming a step (``triggered``: the
    row is written, the state not yet moved; ``ran``: moved to ran, not yet delivered),
    the process SIGKILLs itself there, as a crash would stop it."""
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
    step's name)."""

    def __init__(
        self,
        runtime: Any,
        schedules: Schedules,
        holder: str | None = None,
        *,
        clock: Callable[[], datetime] | None = None,
        batch: int = 20,
        kill: Callable[[str], None] | None = None,
    ) -> None:
        self.runtime, self.schedules = runtime, schedules
        self.holder = holder or f"firer_{new_id()}"
        self.store = schedules.store
        self.clock = clock or schedules.clock
        self.lease = timedelta(seconds=schedules.settings.lease_seconds)
        self.batch, self.kill = batch, kill or (lambda step: None)
        self._stopped = asyncio.Event()

    async def run(self) -> None:
        """Tick every ``poll_seconds`` until ``stop`` (at once again after a tick that
        took a full batch: more may be due)."""
        poll = self.schedules.settings.poll_seconds
        while not self._stopped.is_set():
            try:
                if len(await self.tick()) >= self.batch:
                    continue
            except Exception:  # the store is away: try again at the next tick
                log.exception("schedules: a tick failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), poll)

    def stop(self) -> None:
        self._stopped.set()

    async def tick(self) -> list[Schedule]:
        """Claim what is due now and fire each; what was claimed."""
        now = self.clock()
        claimed = await self.store.claim_schedules(self.holder, now, self.lease, self.batch)
        for schedule in claimed:
            try:
                await self.fire(schedule, now)
            except NotFound:  # its conversation is gone: nothing to deliver to, ever
                log.warning("schedules: %s's conversation is gone; dropped", schedule.id)
                await self.store.delete_schedule(schedule.owner, schedule.id)
            except Exception:  # left held: taken again once its lease runs out
                log.exception("schedules: firing %s failed", schedule.id)
        return claimed

    async def fire(self, schedule: Schedule, now: datetime) -> None:
        if schedule.state == "claimed":
            slot = schedule.next_fire or now
            late = max(0.0, (now - slot).total_seconds())
            schedule = dataclasses.replace(schedule, late_seconds=late)
            there = await self._already_there(schedule)
            if not there and not await self._trigger(schedule):
                return
            self.kill("triggered")
            schedule = dataclasses.replace(schedule, state="ran")
            if not await self.store.move_schedule(schedule, self.holder):
                return
            self.kill("ran")
        await self.store.move_schedule(self._after(schedule, self.clock()), self.holder)

    def _after(self, schedule: Schedule, now: datetime) -> Schedule:
        done = dataclasses.replace(
            schedule, fired=schedule.fired + 1, last_fired_at=now, holder=None, lease_until=None
        )
        if schedule.kind == "once":
            return dataclasses.replace(done, state="delivered", next_fire=None)
        kind: Kind = schedule.kind  # type: ignore[assignment]
        slot = schedule.next_fire or now
        following = next_fire(kind, schedule.spec, max(slot, now), zone_named(schedule.zone))
        return dataclasses.replace(done, state="due", next_fire=following)

    async def _already_there(self, schedule: Schedule) -> bool:
        """Whether this slot's row (or queued input) is stored already."""
        store, cid, mark = self.runtime.store, schedule.conversation_id, marker(schedule)
        window = await store.window(cid, limit=LOOK_BACK)
        if any(row.metadata.get(MARKER) == mark for row in window.rows):
            return True
        queued = await store.list_queued(cid)
        return any(item.message.metadata.get(MARKER) == mark for item in queued)

    async def _trigger(self, schedule: Schedule) -> bool:
        """Write the slot's row; False to leave it for a later tick (a reminder waits
        while a turn runs in its conversation)."""
        if schedule.mode == "reminder":
            return await self._remind(schedule)
        text = f"{_preface(schedule)}\n{schedule.text}"
        kind = "outside" if schedule.mode == "trigger" else "schedule"
        meta = {MARKER: marker(schedule), "trigger": kind, "late_s": schedule.late_seconds}
        row = Message("user", (TextBlock(text),), hidden=True, metadata=meta)
        await self.runtime.submit(schedule.conversation_id, row, policy="queue")
        return True

    async def _remind(self, schedule: Schedule) -> bool:
        cid = schedule.conversation_id
        if self.runtime.busy(cid):
            await self.store.move_schedule(
                dataclasses.replace(schedule, lease_until=self.clock() + timedelta(seconds=1)),
                self.holder,
            )
            return False
        run_id = f"sch_{new_id()}"
        meta = {MARKER: marker(schedule), "trigger": "reminder", "run_id": run_id}
        row = Message("assistant", (TextBlock(schedule.text),), metadata=meta)
        (stored,) = await self.runtime.store.write(AppendMessage(cid, row))
        seq = stored.seq if stored.seq is not None else self.runtime.bus.last_seq(cid)
        self.runtime.bus.publish(cid, MessageCommitted(run_id=run_id, seq=seq, message=stored))
        return True


def _preface(schedule: Schedule) -> str:
    """What the model reads before a prompt's or a trigger's text."""
    if schedule.mode == "trigger":
        return (
            f"[A message from an outside system ({schedule.spec}), not typed by the user. "
            "Answer it as a message to the user.]"
        )
    note = ""
    if schedule.late_seconds and schedule.late_seconds >= LATE_NOTE_S:
        note = f" It fires {round(schedule.late_seconds / 60)} minutes late."
    return (
        f"[A prompt the user scheduled ({schedule.kind} {schedule.spec}, zone "
        f"{schedule.zone}) is due now.{note} Answer it as a message to the user.]"
    )
