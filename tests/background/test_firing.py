"""The firing decision, rule by rule (``background.firing``): pure, no store, no clock."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from ostinato.background.firing import (
    MAX_ATTEMPTS,
    Advance,
    AwaitStageOne,
    Hand,
    Ran,
    Seen,
    StageOne,
    StartStageOne,
    WaitForTurn,
    next_step,
)
from ostinato.store.schedules import Mode, Schedule, State

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def held(mode: Mode = "prompt", state: State = "claimed") -> Schedule:
    made = Schedule("s1", "ann", "c1", mode, "plan my day", "once", "", "UTC", T0, T0)
    return dataclasses.replace(made, state=state, holder="h1", result="Rest.", run_id="r1")


@pytest.mark.parametrize("mode", ["prompt", "reminder", "trigger"])
def test_ran_and_handed_advances(mode: Mode) -> None:
    assert next_step(held(mode, "ran"), Seen(handed=True, busy=True)) == Advance()


def test_a_reminder_waits_for_a_running_turn_but_a_prompt_does_not() -> None:
    assert next_step(held("reminder", "ran"), Seen(busy=True)) == WaitForTurn()
    assert next_step(held("prompt", "ran"), Seen(busy=True)) == Hand()
    assert next_step(held("trigger", "ran"), Seen(busy=True)) == Hand()
    assert next_step(held("reminder", "ran"), Seen()) == Hand()


@pytest.mark.parametrize("mode", ["reminder", "trigger"])
def test_no_work_runs_before_a_reminder_or_a_trigger(mode: Mode) -> None:
    assert next_step(held(mode), Seen()) == Ran("plan my day")


def test_a_prompt_starts_its_stage_one_then_awaits_it() -> None:
    assert next_step(held(), Seen()) == StartStageOne(1)
    assert next_step(held(), Seen(stage_one=StageOne(1, running=True))) == AwaitStageOne()


@pytest.mark.parametrize("stop", ["end_turn", "budget_exhausted", "crashed"])
def test_an_answer_is_what_ran(stop: str) -> None:
    one = StageOne(1, False, stop, "  Your plan: rest. ", "run_1")
    assert next_step(held(), Seen(stage_one=one)) == Ran("Your plan: rest.", "run_1")


@pytest.mark.parametrize("stop", ["interrupted", "failed", "cancelled", "paused"])
def test_a_stop_without_an_answer_is_tried_again_then_said(stop: str) -> None:
    first = StageOne(1, False, stop, None, "run_1")
    assert next_step(held(), Seen(stage_one=first)) == StartStageOne(2)
    last = StageOne(MAX_ATTEMPTS, False, stop, None, "run_2")
    step = next_step(held(), Seen(stage_one=last))
    assert isinstance(step, Ran) and step.run_id == "run_2"
    assert f"({stop}) {MAX_ATTEMPTS} times" in step.result


def test_an_empty_answer_is_no_answer() -> None:
    one = StageOne(1, False, "end_turn", "   ", "run_1")
    assert next_step(held(), Seen(stage_one=one)) == StartStageOne(2)
