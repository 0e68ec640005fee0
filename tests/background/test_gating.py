"""The job gate, rule by rule (``background.gating``): pure, no store, no clock."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from ostinato.background.gating import Run, Skip, admit, settle
from ostinato.config.background import JobSection
from ostinato.store.jobs import JobState

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
ON = JobSection(idle_minutes=30, calls_per_day=5)


def test_off_or_active_is_skipped() -> None:
    later = T0 + timedelta(hours=1)
    assert admit(JobSection(enabled=False), None, T0, later) == Skip("off")
    assert admit(ON, None, T0, T0 + timedelta(minutes=29)) == Skip("active")
    assert admit(ON, None, T0, T0 + timedelta(minutes=30)) == Run(5)


def test_once_per_stretch_of_idleness() -> None:
    state = JobState("ann", "lapse", active_at=T0)
    assert admit(ON, state, T0, T0 + timedelta(hours=5)) == Skip("ran")
    again = T0 + timedelta(hours=1)
    assert admit(ON, state, again, again + timedelta(minutes=30)) == Run(5)


def test_calls_left_count_the_day_and_a_new_day_starts_afresh() -> None:
    state = JobState("ann", "lapse", day="2026-12-01", calls=3)
    assert admit(ON, state, T0, T0 + timedelta(hours=1)) == Run(2)
    spent = dataclasses.replace(state, calls=9)
    assert admit(ON, spent, T0, T0 + timedelta(hours=1)) == Run(0)
    tomorrow = T0 + timedelta(days=1)
    assert admit(ON, spent, tomorrow, tomorrow + timedelta(hours=1)) == Run(5)


def test_work_left_for_want_of_calls_waits_for_the_next_day() -> None:
    state = JobState("ann", "episodes", day="2026-12-01", calls=4)
    now = T0 + timedelta(hours=1)
    waiting = settle(state, T0, now, calls=1, wanting=True)
    assert (waiting.calls, waiting.active_at) == (5, None)
    assert waiting.not_before == datetime(2026, 12, 2, tzinfo=UTC)
    assert admit(ON, waiting, T0, now + timedelta(hours=2)) == Skip("waiting")
    assert admit(ON, waiting, T0, datetime(2026, 12, 2, 0, 1, tzinfo=UTC)) == Run(5)


def test_a_run_closes_its_stretch() -> None:
    done = settle(JobState("ann", "lapse"), T0, T0 + timedelta(hours=1), calls=2, wanting=False)
    assert (done.active_at, done.calls, done.day, done.not_before) == (T0, 2, "2026-12-01", None)
    assert done.last_run_at == T0 + timedelta(hours=1)
