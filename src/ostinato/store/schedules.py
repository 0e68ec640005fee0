"""The store's side of schedules: prompts and reminders that fire at a time, once or on
a recurrence, in a conversation, for its owner.

A schedule's ``state`` moves ``due -> claimed -> ran -> delivered``:

- ``due``: waiting for ``next_fire``;
- ``claimed``: a server process (``holder``) took it, until ``lease_until``;
- ``ran``: its work ran: a prompt's stage one (a background turn) answered, and the
  answer is kept in ``result`` (a reminder's or a trigger's text needs no work);
- ``delivered``: the result is in the conversation (a reminder's row; the hidden row a
  normal turn answers). A recurring schedule goes back to ``due`` at its next slot
  instead (``fired`` counts its deliveries).

``wake_at`` is the one column the poller reads (one indexed query): ``next_fire`` while
due, ``lease_until`` while claimed or ran (so work a dead process held is found again
when its lease runs out), NULL once delivered. Every change is a compare-and-set on
the holder, so of two processes only one moves a schedule on.

Times are the caller's clock (the poller's ``Clock``), so tests drive them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, Protocol, runtime_checkable

from ostinato.errors import ClientError

State = Literal["due", "claimed", "ran", "delivered"]
Mode = Literal["prompt", "reminder", "trigger", "run"]
REVISED = ("text", "kind", "spec", "zone", "state", "next_fire")  # what a revision changes


@dataclass(frozen=True, slots=True)
class Schedule:
    id: str
    owner: str
    conversation_id: str
    mode: Mode  # prompt: a turn answers it; reminder: its text is the reply (no model);
    # trigger: an outside system's poke (POST .../triggers), answered like a prompt;
    # run: an Agent Protocol cron's run, its text a user message that a turn answers
    text: str
    kind: str  # background.when.Kind
    spec: str
    zone: str
    created_at: datetime
    next_fire: datetime | None
    state: State = "due"
    holder: str | None = None
    lease_until: datetime | None = None
    fired: int = 0
    last_fired_at: datetime | None = None
    late_seconds: float | None = None  # how late its last slot fired
    run_id: str | None = None  # the run_id of its firing's work (a prompt's stage one)
    result: str | None = None  # what that work answered, once ran (stage two hands it on)
    attempts: int = 0  # stage-one attempts begun for the slot being fired

    @property
    def wake_at(self) -> datetime | None:
        if self.state == "due":
            return self.next_fire
        if self.state in ("claimed", "ran"):
            return self.lease_until
        return None


class TooManySchedules(ClientError):
    """An owner has as many schedules as the limit allows: 409 ``too_many_schedules``."""

    status = 409
    code = "too_many_schedules"


def refuse_over(count: int, limit: int) -> None:
    if count >= limit:
        raise TooManySchedules(
            f"you have {count} schedules, the limit is {limit}: delete one before adding another"
        )


@runtime_checkable
class ScheduleStore(Protocol):
    async def add_schedule(self, schedule: Schedule, limit: int) -> Schedule:
        """Store a new schedule unless its owner already has ``limit`` that are not
        delivered (``TooManySchedules``)."""
        ...

    async def schedules(self, owner: str) -> list[Schedule]:
        """The owner's schedules that are not delivered, soonest first."""
        ...

    async def schedule(self, schedule_id: str) -> Schedule | None: ...

    async def delete_schedule(self, owner: str, schedule_id: str) -> bool:
        """Delete one of the owner's schedules; False if it has none by that id."""
        ...

    async def revise_schedule(self, schedule: Schedule) -> bool:
        """Store ``schedule``'s text, recurrence (``kind``, ``spec``, ``zone``), state
        and ``next_fire`` if it is its owner's and no process holds it (it is not
        firing); ``False`` otherwise, nothing written."""
        ...

    async def claim_schedules(
        self, holder: str, now: datetime, lease: timedelta, limit: int
    ) -> list[Schedule]:
        """Take up to ``limit`` schedules whose ``wake_at`` is at or before ``now`` for
        ``holder`` until ``now + lease``: a due one becomes claimed, a claimed or ran one
        whose lease ran out keeps its state under its new holder. Each goes to one
        caller only."""
        ...

    async def move_schedule(self, schedule: Schedule, holder: str) -> bool:
        """Store ``schedule`` (its new state and times) if ``holder`` still holds it."""
        ...


class MemorySchedules:
    """``ScheduleStore`` for ``MemoryStore`` (one process)."""

    _schedules: dict[str, Schedule]

    async def add_schedule(self, schedule: Schedule, limit: int) -> Schedule:
        refuse_over(len(await self.schedules(schedule.owner)), limit)
        self._schedules[schedule.id] = schedule
        return schedule

    async def schedules(self, owner: str) -> list[Schedule]:
        found = [s for s in self._schedules.values() if s.owner == owner]
        live = [s for s in found if s.state != "delivered"]
        return sorted(live, key=lambda s: (s.next_fire or s.created_at, s.id))

    async def schedule(self, schedule_id: str) -> Schedule | None:
        return self._schedules.get(schedule_id)

    async def delete_schedule(self, owner: str, schedule_id: str) -> bool:
        found = self._schedules.get(schedule_id)
        if found is None or found.owner != owner:
            return False
        del self._schedules[schedule_id]
        return True

    async def revise_schedule(self, schedule: Schedule) -> bool:
        found = self._schedules.get(schedule.id)
        if found is None or found.owner != schedule.owner or found.holder is not None:
            return False
        revised = {name: getattr(schedule, name) for name in REVISED}
        self._schedules[schedule.id] = dataclasses.replace(found, **revised)
        return True

    async def claim_schedules(
        self, holder: str, now: datetime, lease: timedelta, limit: int
    ) -> list[Schedule]:
        ready = [s for s in self._schedules.values() if s.wake_at is not None and s.wake_at <= now]
        ready.sort(key=lambda s: (s.wake_at or now, s.id))
        claimed = []
        for found in ready[:limit]:
            state: State = "claimed" if found.state == "due" else found.state
            taken = dataclasses.replace(found, state=state, holder=holder, lease_until=now + lease)
            self._schedules[found.id] = taken
            claimed.append(taken)
        return claimed

    async def move_schedule(self, schedule: Schedule, holder: str) -> bool:
        found = self._schedules.get(schedule.id)
        if found is None or found.holder != holder:
            return False
        self._schedules[schedule.id] = schedule
        return True
