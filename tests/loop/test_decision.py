"""The pure step decision, without any I/O."""

from __future__ import annotations

from dataclasses import replace

from ostinato.loop.decision import (
    NUDGE,
    REPEATED_CALL,
    STOPPED_FOR_REPEATING,
    TOOLS_OFF,
    CallModel,
    Finish,
    LoopState,
    RunTools,
    ToolOutcome,
    after_reply,
    after_tools,
)
from ostinato.messages import Message, TextBlock, ToolUseBlock
from ostinato.models.assembly import ModelReply
from ostinato.models.base import Usage


def reply(*blocks: TextBlock | ToolUseBlock, broken: dict[str, str] | None = None) -> ModelReply:
    stop = "tool_use" if any(isinstance(b, ToolUseBlock) for b in blocks) else "end_turn"
    return ModelReply(Message("assistant", blocks), stop, Usage(), broken or {})


def call(name: str = "t", i: int = 1, **args: object) -> ToolUseBlock:
    return ToolUseBlock(f"c{i}", name, dict(args))


def test_text_only_reply_finishes_end_turn() -> None:
    state, step = after_reply(LoopState(10), reply(TextBlock("hi")))
    assert step == Finish("end_turn", {}) and state.model_calls == 1


def test_tool_reply_runs_tools_with_broken_calls_marked() -> None:
    _, step = after_reply(LoopState(10), reply(call(i=1), call(i=2), broken={"c2": "cut"}))
    assert isinstance(step, RunTools)
    assert [c.id for c in step.calls] == ["c1", "c2"] and step.broken == {"c2": "cut"}


def test_budget_reached_turns_tools_off_then_finishes_budget_exhausted() -> None:
    state, _ = after_reply(LoopState(1), reply(call()))
    state, step = after_tools(state, (ToolOutcome("t"),))
    assert step == CallModel(tools_off=True) and state.wrapping_up
    _, step = after_reply(state, reply(TextBlock("summary")))
    assert step == Finish("budget_exhausted", {})
    _, step = after_reply(state, reply(call(i=9)))
    assert isinstance(step, Finish) and step.stop_reason == "budget_exhausted"
    assert set(step.unanswered) == {"c9"}


def test_third_identical_call_stops_crashed_after_a_wrap_up_second_does_not() -> None:
    state = LoopState(10)
    state, step = after_reply(state, reply(call(x=1)))
    state, step = after_reply(state, reply(call(x=1, i=2)))
    assert isinstance(step, RunTools) and not step.broken
    state, step = after_reply(state, reply(call(x=1, i=3)))
    assert isinstance(step, RunTools) and set(step.broken) == {"c3"}  # answered, not run
    assert "3 times running" in step.broken["c3"]
    assert state.stopping == "crashed" and state.wrapping_up
    state, step = after_tools(state, (ToolOutcome("t", step.broken["c3"]),))
    assert step == CallModel(tools_off=True, note=STOPPED_FOR_REPEATING)
    _, step = after_reply(state, reply(TextBlock("I kept calling t with x=1; it did not help.")))
    assert step == Finish("crashed", {})


def test_tool_calls_in_a_repetition_wrap_up_are_answered_and_the_turn_ends_crashed() -> None:
    state = LoopState(10, wrapping_up=True, stopping="crashed")
    _, step = after_reply(state, reply(call(i=7)))
    assert step == Finish("crashed", {"c7": TOOLS_OFF})


def test_a_repeat_during_the_budget_wrap_up_ends_crashed_at_once() -> None:
    state = LoopState(10)
    for i in (1, 2):
        state, _ = after_reply(state, reply(call(i=i)))
    _, step = after_reply(replace(state, wrapping_up=True), reply(call(i=3)))
    assert step == Finish("crashed", {"c3": REPEATED_CALL.format(n=3)})


def test_argument_order_does_not_hide_a_repeat() -> None:
    state = LoopState(10)
    for i in range(2):
        state, _ = after_reply(state, reply(ToolUseBlock(f"a{i}", "t", {"a": 1, "b": 2})))
    state, step = after_reply(state, reply(ToolUseBlock("a3", "t", {"b": 2, "a": 1})))
    assert isinstance(step, RunTools) and set(step.broken) == {"a3"}
    assert state.stopping == "crashed"


def test_a_different_call_resets_the_run() -> None:
    state = LoopState(10)
    for args in ({"x": 1}, {"x": 1}, {"x": 2}, {"x": 1}, {"x": 1}):
        state, step = after_reply(state, reply(call(**args)))
        assert isinstance(step, RunTools)


def test_nudge_once_on_the_second_identical_error() -> None:
    state = LoopState(10)
    state, step = after_tools(state, (ToolOutcome("t", "bad"),))
    assert step == CallModel()
    state, step = after_tools(state, (ToolOutcome("t", "other"),))
    assert step == CallModel()
    state, step = after_tools(state, (ToolOutcome("t", "bad"),))
    assert step == CallModel(note=NUDGE)
    state, step = after_tools(state, (ToolOutcome("t", "other"),))
    assert step == CallModel()  # one-time


def test_the_same_error_from_another_tool_is_not_a_repeat() -> None:
    state, _ = after_tools(LoopState(10), (ToolOutcome("a", "bad"),))
    _, step = after_tools(state, (ToolOutcome("b", "bad"),))
    assert step == CallModel()
