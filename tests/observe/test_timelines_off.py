"""Timelines off (``observability.timeline = false``, ``observe.keep_timelines``): turns
store no timeline, and with nothing installed either a turn records no steps and a tool
call is not made current; the metrics block counts the same; an installed backend still
gets its steps and nesting; the setting reaches the process from the deployment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ostinato import observe
from ostinato.config import load_config
from ostinato.deployment import build_runtime
from ostinato.models.base import Usage
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.observe import backend
from ostinato.store.memory import MemoryStore
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry
from tests.loop.harness import Harness


@pytest.fixture
def timelines_off() -> Iterator[None]:
    previous = observe.keep_timelines(False)
    try:
        yield
    finally:
        observe.keep_timelines(previous)


seen: list[observe.Scope | None] = []


async def where() -> str:
    """Say which scope is current while the tool runs."""
    seen.append(observe.current())
    return "here"


def harness() -> Harness:
    seen.clear()
    return Harness(
        tool_step(("where", {}), usage=Usage(10, 2)),
        text_step("done", usage=Usage(12, 3)),
        tools=ToolRegistry([function_tool(where)]),
    )


class Steps(observe.Backend):
    """Keeps each turn that ended, with its ledger."""

    def __init__(self) -> None:
        self.turns: list[observe.TurnScope] = []

    def ended(self, scope: observe.Scope) -> None:
        if isinstance(scope, observe.TurnScope):
            self.turns.append(scope)


async def test_with_nothing_installed_a_turn_keeps_no_timeline_and_counts_the_same(
    timelines_off: None,
) -> None:
    assert not backend.DETAILED
    assert (observe.model_call, observe.tool_call) == (observe.CountedCall, observe.CountedTool)
    h = harness()
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "where?")
    assert result.stop_reason == "end_turn"
    metrics = result.metrics
    assert metrics["model_calls"] == 2 and metrics["tools"] == {"where": 1}
    assert (metrics["tokens_in"], metrics["tokens_out"]) == (22, 5)
    assert metrics["models"][h.model.name]["calls"] == 2
    [stored] = await h.store.list_turns(cid)
    assert stored.timeline is None and stored.metrics["model_calls"] == 2
    [current] = seen
    assert isinstance(current, observe.TurnScope)  # the tool call was not made current
    assert current.ledger.steps == [] and not current.timed


async def test_with_timelines_on_the_tool_call_is_current_and_steps_are_kept() -> None:
    assert backend.TIMELINES and backend.DETAILED
    assert (observe.model_call, observe.tool_call) == (observe.CallScope, observe.ToolScope)
    h = harness()
    cid = await h.conversation()
    await h.runtime.run_turn(cid, "where?")
    [current] = seen
    assert isinstance(current, observe.ToolScope) and current.name == "where"
    [stored] = await h.store.list_turns(cid)
    assert stored.timeline is not None
    assert [s["index"] for s in stored.timeline["steps"]] == [1, 2]


async def test_an_installed_backend_still_gets_steps_and_nesting(timelines_off: None) -> None:
    steps = Steps()
    previous = observe.install(steps)
    try:
        assert (backend.HEARING, backend.DETAILED) == (True, True)
        assert observe.tool_call is observe.ToolScope  # bound afresh by ``install``
        h = harness()
        cid = await h.conversation()
        await h.runtime.run_turn(cid, "where?")
    finally:
        observe.install(previous)
    assert backend.DETAILED is False  # uninstalled, timelines still off
    assert observe.tool_call is observe.CountedTool
    [turn] = steps.turns
    assert [step.index for step in turn.ledger.steps] == [1, 2]
    [current] = seen
    assert isinstance(current, observe.ToolScope)
    [stored] = await h.store.list_turns(cid)
    assert stored.timeline is None  # the backend reads the steps; the turn keeps no timeline


async def test_the_setting_reaches_the_process_from_the_deployment(tmp_path: Path) -> None:
    config, _ = load_config(None, env={"OSTINATO_OBSERVABILITY__TIMELINE": "false"})
    assert config.observability.timeline is False
    previous = backend.TIMELINES
    try:
        for setting, kept in ((config, False), (load_config(None, env={})[0], True)):
            deployment = await build_runtime(
                setting,
                MemoryStore(),
                default_model=ScriptedModel(),
                default_id="scripted:default",
                data_dir=tmp_path,
                env={},
            )
            await deployment.aclose()
            assert backend.TIMELINES is kept  # on by default
    finally:
        observe.keep_timelines(previous)


def test_a_counted_call_is_recorded_once_however_it_ends(timelines_off: None) -> None:
    class Turn:
        conversation_id, run_id, id, kind = "c", "r", "t", "user"

    turn = observe.TurnScope(None, Turn(), None)
    token = turn.attach()
    try:
        with observe.model_call("a:b", None, "router") as call:
            assert isinstance(call, observe.CountedCall) and call.first is not None
            call.retried("rate_limited: slow down")  # nothing reads it: no error either
            call.replied(ModelReplyLike(Usage(3, 1)))  # type: ignore[arg-type]
        failing = observe.model_call("a:b", None, "step")
        failing.failed(RuntimeError("down"))
        failing.end()
        with pytest.raises(ValueError), observe.tool_call("t1", "shell", {}):
            raise ValueError("no")
    finally:
        turn.detach(token)
    block = turn.ledger.snapshot("a:b")
    assert block["model_calls"] == 2 and block["model_calls_by_purpose"] == {"router": 1, "step": 1}
    assert (block["tokens_in"], block["tokens_out"]) == (3, 1)  # the failed call has none
    assert block["tools"] == {"shell": 1}
    assert turn.ledger.timeline() is None


class ModelReplyLike:
    def __init__(self, usage: Usage) -> None:
        self.usage, self.stop_reason, self.message = usage, "end_turn", None


def test_switched_off_during_a_turn_it_keeps_a_timeline_of_the_calls_before() -> None:
    class Turn:
        conversation_id, run_id, id, kind = "c", "r", "t", "user"

    turn = observe.TurnScope(None, Turn(), None)  # begun with timelines on
    token = turn.attach()
    previous = backend.TIMELINES
    try:
        turn.next_step()
        observe.model_call("a:b", None, "step").replied(ModelReplyLike(Usage(5, 1)))
        observe.keep_timelines(False)  # from here calls are only counted
        observe.tool_call("t1", "shell", {}).ran("ok", "done")
        observe.model_call("a:b", None, "step").replied(ModelReplyLike(Usage(7, 2)))
    finally:
        turn.detach(token)
        observe.keep_timelines(previous)
    turn.settle()
    block = turn.ledger.snapshot("a:b")
    assert block["model_calls"] == 2 and block["tools"] == {"shell": 1}
    assert (block["tokens_in"], block["tokens_out"]) == (12, 3)
    timeline = turn.ledger.timeline()
    assert timeline is not None
    [step] = timeline["steps"]
    [call] = step["model_calls"]  # the one made before the switch, with its times
    assert call["tokens_in"] == 5 and call["start_s"] >= 0 and call["duration_s"] >= 0
    assert step["tool_calls"] == []
