"""The firing decision, rule by rule (``background.firing``): pure, no store, no clock."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from ostinato.background.firing import (
    MAX_ATTEMPTS,
    MAX_HANDS,
    Advance,
    AwaitStageOne,
    AwaitStageTwo,
    Hand,
    Ran,
    Seen,
    StageOne,
    StageTwo,
    StartStageOne,
    WaitForTurn,
    next_step,
)
from ostinato.store.schedules import Mode, Schedule, State

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def held(mode: Mode = "prompt", state: State = "claimed") -> Schedule:
    made = Schedule("s1", "ann", "c1", mode, "plan my day", "once", "", "UTC", T0, T0)
    return dataclasses.replace(made, state=state, holder="h1", result="Rest.", run_id="r1")


def test_a_reminder_handed_on_advances() -> None:
    seen = Seen(StageTwo(1), busy=True)
    assert next_step(held("reminder", "ran"), seen) == Advance()


@pytest.mark.parametrize("mode", ["prompt", "trigger", "run"])
def test_the_turn_answering_a_handed_row_is_awaited_then_advanced(mode: Mode) -> None:
    running = Seen(StageTwo(1, running=True, run_id="t1"))
    assert next_step(held(mode, "ran"), running) == AwaitStageTwo("t1")
    for stop in ("end_turn", "budget_exhausted", "crashed", "paused", "cancelled"):
        ended = Seen(StageTwo(1, False, stop, "t1"))
        assert next_step(held(mode, "ran"), ended) == Advance()


@pytest.mark.parametrize("stop", ["interrupted", "failed"])
def test_a_reply_cut_off_is_asked_for_again_once(stop: str) -> None:
    assert next_step(held("prompt", "ran"), Seen(StageTwo(1, False, stop))) == Hand()
    last = Seen(StageTwo(MAX_HANDS, False, stop))
    assert next_step(held("prompt", "ran"), last) == Advance()


@pytest.mark.parametrize("stop", ["interrupted", "failed"])
def test_a_run_is_handed_on_once_however_its_turn_ended(stop: str) -> None:
    assert next_step(held("run", "ran"), Seen(StageTwo(1, False, stop))) == Advance()
    assert next_step(held("run", "ran"), Seen(busy=True)) == Hand()  # it queues


def test_a_reminder_waits_for_a_running_turn_but_a_prompt_does_not() -> None:
    assert next_step(held("reminder", "ran"), Seen(busy=True)) == WaitForTurn()
    assert next_step(held("prompt", "ran"), Seen(busy=True)) == Hand()
    assert next_step(held("trigger", "ran"), Seen(busy=True)) == Hand()
    assert next_step(held("reminder", "ran"), Seen()) == Hand()


@pytest.mark.parametrize("mode", ["reminder", "trigger", "run"])
def test_no_work_runs_before_a_reminder_or_a_trigger(mode: Mode) -> None:
    assert next_step(held(mode), Seen()) == Ran("plan my day")


def test_a_prompt_starts_its_stage_one_then_awaits_it() -> None:
    assert next_step(held(), Seen()) == StartStageOne(1)
    running = StageOne(1, running=True, run_id="r1")
    assert next_step(held(), Seen(stage_one=running)) == AwaitStageOne("r1")


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
