"""An owner's schedules: create, list, delete, as the ``schedule`` tool and
``/v1/schedules`` both do them (one ``Schedules`` per deployment, so they agree on the
limit and the default zone). A schedule made without a zone takes the zone of the
owner's newest schedule not yet delivered, else the deployment's (``background.zone``).

A schedule is a ``prompt`` (at its time the agent answers it in the conversation, its
text hidden from the chat view) or a ``reminder`` (at its time its text is the reply, no
model call); an Agent Protocol cron makes ``run`` schedules (at its time its text is a
user message in the conversation, answered by a turn), which may be paused (no
``next_fire``) and revised while no process fires them (``revise``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from ostinato.background.when import parse_when
from ostinato.config.background import BackgroundSection
from ostinato.errors import Conflict, InvalidRequest, NotFound
from ostinato.ids import new_id
from ostinato.store.base import utcnow
from ostinato.store.schedules import Schedule, ScheduleStore

TEXT_LIMIT = 4_000
TRIGGERS_LIMIT = 1_000  # undelivered schedules and triggers of one owner, for a trigger
SOURCE_LIMIT = 100


class Schedules:
    """Schedules in ``store`` under ``settings`` (``[background]``); ``clock`` is now."""

    def __init__(
        self,
        store: object,
        settings: BackgroundSection | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        if not isinstance(store, ScheduleStore):
            raise TypeError(f"{type(store).__name__} keeps no schedules")
        self.store: ScheduleStore = store
        self.settings = settings or BackgroundSection()
        self.clock = clock

    async def create(
        self,
        owner: str,
        conversation_id: str,
        when: str,
        text: str,
        *,
        mode: Literal["prompt", "reminder", "run"] = "prompt",
        zone: str | None = None,
        paused: bool = False,
    ) -> Schedule:
        """A new schedule (``paused``: it does not fire until revised); ``InvalidRequest``
        for a ``when`` or text it cannot take, ``TooManySchedules`` over the owner's
        limit."""
        text = _checked_text(text)
        now = self.clock()
        zone = zone or await self.zone_of(owner) or self.settings.zone
        recurrence = parse_when(when, now, zone)
        schedule = Schedule(
            id=new_id(),
            owner=owner,
            conversation_id=conversation_id,
            mode=mode,
            text=text,
            kind=recurrence.kind,
            spec=recurrence.spec,
            zone=zone,
            created_at=now,
            next_fire=None if paused else recurrence.first,
        )
        return await self.store.add_schedule(schedule, self.settings.schedules_per_owner)

    async def revise(
        self, owner: str, schedule_id: str, when: str, text: str, zone: str, *, paused: bool
    ) -> Schedule:
        """One of the owner's schedules with a new ``when`` (read from now), text and
        zone, paused or due at its next slot; ``NotFound`` for another's or none,
        ``Conflict`` while a process fires it."""
        found = await self.store.schedule(schedule_id) if len(schedule_id) <= 100 else None
        if found is None or found.owner != owner:
            raise NotFound(f"no schedule {schedule_id[:100]!r}")
        recurrence = parse_when(when, self.clock(), zone)
        first = None if paused else recurrence.first
        revised = dataclasses.replace(
            found,
            text=_checked_text(text),
            kind=recurrence.kind,
            spec=recurrence.spec,
            zone=zone,
            state="due",
            next_fire=first,
        )
        if not await self.store.revise_schedule(revised):
            raise Conflict("the schedule is firing now: change it once its run has ended")
        return revised

    async def trigger(
        self, owner: str, conversation_id: str, text: str, source: str | None = None
    ) -> Schedule:
        """An outside system's poke: a one-shot due now, answered like a prompt (its
        ``spec`` names the source). Refused past ``TRIGGERS_LIMIT`` undelivered ones."""
        text = text.strip()
        if not text or "\x00" in text or len(text) > TEXT_LIMIT:
            raise InvalidRequest(f"a trigger's text is 1 to {TEXT_LIMIT} characters")
        source = (source or "outside").strip()[:SOURCE_LIMIT] or "outside"
        now = self.clock()
        schedule = Schedule(
            new_id(), owner, conversation_id, "trigger", text, "once", source, "UTC", now, now
        )
        return await self.store.add_schedule(schedule, TRIGGERS_LIMIT)

    async def zone_of(self, owner: str) -> str | None:
        """The owner's zone: that of their newest schedule not yet delivered (a trigger
        has none; a cron's is the protocol's, UTC unless it names one), if they have one."""
        found = [s for s in await self.store.schedules(owner) if s.mode in ("prompt", "reminder")]
        return max(found, key=lambda s: (s.created_at, s.id)).zone if found else None

    async def list(self, owner: str) -> list[Schedule]:
        return await self.store.schedules(owner)

    async def delete(self, owner: str, schedule_id: str) -> Schedule:
        """Delete one of the owner's schedules; ``NotFound`` for another's or none."""
        found = await self.store.schedule(schedule_id) if len(schedule_id) <= 100 else None
        if found is None or found.owner != owner:
            raise NotFound(f"no schedule {schedule_id[:100]!r}")
        if not await self.store.delete_schedule(owner, schedule_id):
            raise NotFound(f"no schedule {schedule_id[:100]!r}")
        return found


def _checked_text(text: str) -> str:
    text = text.strip()
    if not text or "\x00" in text or len(text) > TEXT_LIMIT:
        raise InvalidRequest(f"a schedule's text is 1 to {TEXT_LIMIT} characters")
    return text


def describe(schedule: Schedule) -> dict[str, Any]:
    """A schedule as the tool shows it to the model."""
    out: dict[str, Any] = {
        "id": schedule.id,
        "mode": schedule.mode,
        "text": schedule.text,
        "kind": schedule.kind,
        "spec": schedule.spec,
        "zone": schedule.zone,
        "state": schedule.state,
        "fired": schedule.fired,
    }
    if schedule.next_fire is not None:
        out["next_fire"] = schedule.next_fire.isoformat()
    return out
