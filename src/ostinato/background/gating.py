"""The job gate: whether an idle-gated job runs now for an owner, and its state after a
run. Pure.

``admit`` takes a job's settings, its stored state for the owner (None before its first
run), the owner's last activity (the newest change to their conversations) and now, and
returns ``Run`` (claim it, with the model calls it may make) or ``Skip`` (why not).
``settle`` gives the state a run leaves. The poller (``jobs.JobRunner``) claims, runs
and stores; these two decide.

Rules of ``admit``, in the order they are checked:

1. A job switched off in the settings: ``Skip("off")``.
2. The owner active less than ``idle_minutes`` ago: ``Skip("active")``.
3. The job already ran after that activity (``active_at``): ``Skip("ran")`` (once per
   stretch of idleness).
4. Held back until ``not_before`` (it ran out of model calls and has work left): until
   then ``Skip("waiting")``.
5. Otherwise ``Run`` with the calls left today: ``calls_per_day`` less those made on
   this UTC day (a new day starts from nothing).

``settle``: the calls of the day add up (a new day resets them); a run that left work
for want of calls keeps the stretch open and waits for the next UTC day (``not_before``:
its midnight); any other run, failed or not, closes the stretch (``active_at``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, TypeAlias

from ostinato.config.background import JobSection
from ostinato.store.jobs import JobState

SkipReason = Literal["off", "active", "ran", "waiting"]


@dataclass(frozen=True, slots=True)
class Run:
    calls_left: int


@dataclass(frozen=True, slots=True)
class Skip:
    reason: SkipReason


Gate: TypeAlias = Run | Skip


def day_of(at: datetime) -> str:
    return at.astimezone(UTC).date().isoformat()


def calls_today(state: JobState | None, now: datetime) -> int:
    return state.calls if state is not None and state.day == day_of(now) else 0


def admit(settings: JobSection, state: JobState | None, active: datetime, now: datetime) -> Gate:
    if not settings.enabled:
        return Skip("off")
    if now - active < timedelta(minutes=settings.idle_minutes):
        return Skip("active")
    if state is not None and state.active_at is not None and state.active_at >= active:
        return Skip("ran")
    if state is not None and state.not_before is not None and now < state.not_before:
        return Skip("waiting")
    return Run(max(0, settings.calls_per_day - calls_today(state, now)))


def settle(
    state: JobState, active: datetime, now: datetime, *, calls: int, wanting: bool
) -> JobState:
    """The state after a run that made ``calls`` model calls; ``wanting``: it left work
    for want of calls."""
    used = calls_today(state, now) + calls
    done = dataclasses.replace(state, last_run_at=now, day=day_of(now), calls=used)
    if wanting:
        midnight = datetime.combine(
            now.astimezone(UTC).date() + timedelta(days=1), datetime.min.time(), UTC
        )
        return dataclasses.replace(done, not_before=midnight)
    return dataclasses.replace(done, active_at=active, not_before=None)
