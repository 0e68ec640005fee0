"""The turn loop end to end, against the scripted model and the in-memory store."""

from __future__ import annotations

import asyncio
import json

import pytest

from ostinato.errors import ContextTooLong, ToolError
from ostinato.frames import MessageCommitted, ToolFinished, TurnFinished
from ostinato.loop.decision import NUDGE
from ostinato.models.base import Stop, TextDelta, ToolCallDelta, ToolCallStart, Usage
from ostinato.models.scripted import Step, error_step, text_step, tool_step
from ostinato.tools.base import ToolContext
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry
from tests.loop.harness import Harness


async def test_plain_reply_ends_the_turn_idle_with_metrics() -> None:
    h = Harness(text_step("Hello there.", chunks=3, usage=Usage(12, 4)))
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "hi")
    assert result.stop_reason == "end_turn"
    rows = await h.messages(cid)
    assert [(m.seq, m.role) for m in rows] == [(1, "user"), (2, "assistant")]
    assert rows[1].text == "Hello there."
    metrics = rows[1].metadata["metrics"]
    assert metrics["tokens_in"] == 12 and metrics["tokens_out"] == 4
    assert metrics["tokens_total"] == 16 and metrics["model_calls"] == 1
    assert metrics["tools"] == {} and metrics["response_time_s"] >= 0
    assert (await h.store.get_conversation(cid)).state == "idle"  # type: ignore[union-attr]
    assert h.bus.types() == [
        "turn.started",
        "message",
        "text.delta",
        "text.delta",
        "text.delta",
        "message",
        "turn.finished",
    ]
    h.model.assert_consumed()


async def test_tool_step_then_answer_records_tool_call_and_counts_it() -> None:
    h = Harness(tool_step(("calculator", {"expression": "2*(3+4)"})), text_step("14"))
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "what is 2*(3+4)?")
    assert result.stop_reason == "end_turn"
    rows = await h.messages(cid)
    assert [m.role for m in rows] == ["user", "assistant", "tool", "assistant"]
    assert rows[2].tool_results[0].text == "2*(3+4) = 14"
    assert rows[3].metadata["metrics"]["tools"] == {"calculator": 1}
    (record,) = await h.store.list_tool_calls(cid)
    assert record.status == "ok" and record.result == "2*(3+4) = 14"
    assert record.finished_at is not None and record.duration_s is not None
    # the second request was built from the stored rows, results included
    second = h.model.requests[1]
    assert [m.seq for m in second.messages] == [1, 2, 3]
    types = h.bus.types()
    assert types.index("tool.started") < types.index("tool.finished")


async def test_parallel_tools_run_concurrently_and_results_keep_call_order() -> None:
    started: list[str] = []
    both_running = asyncio.Event()

    async def slow(name: str, delay: float) -> str:
        """Wait, then answer."""
        started.append(name)
        if len(started) == 2:
            both_running.set()
        await asyncio.wait_for(both_running.wait(), 1)
        await asyncio.sleep(delay)
        return name

    tools = ToolRegistry([function_tool(slow)])
    h = Harness(
        tool_step(("slow", {"name": "a", "delay": 0.05}), ("slow", {"name": "b", "delay": 0})),
        text_step("done"),
        tools=tools,
    )
    cid = await h.conversation()
    await h.runtime.run_turn(cid, "go")
    rows = await h.messages(cid)
    assert [r.text for r in rows[2].tool_results] == ["a", "b"]  # call order, not finish order
    finished = [f.tool_use_id for f in h.bus.frames if isinstance(f, ToolFinished)]
    assert finished == ["call_2", "call_1"]  # b finished first and was announced first
    records = {r.id: r.status for r in await h.store.list_tool_calls(cid)}
    assert records == {"call_1": "ok", "call_2": "ok"}


async def test_tool_failures_become_error_results_the_model_sees() -> None:
    async def explode() -> str:
        """Always fails."""
        raise RuntimeError("boom")

    async def refuse() -> str:
        """Fails on purpose."""
        raise ToolError("no such record")

    tools = ToolRegistry([*builtin_tools(), function_tool(explode), function_tool(refuse)])
    h = Harness(
        tool_step(
            ("explode", {}),
            ("nope", {}),
            ("calculator", {"expression": 7}),
            ("calculator", {}),
            ("refuse", {}),
        ),
        text_step("sorry"),
        tools=tools,
    )
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "try")
    assert result.stop_reason == "end_turn"
    results = (await h.messages(cid))[2].tool_results
    assert all(r.is_error for r in results)
    assert "RuntimeError: boom" in results[0].text
    assert "no tool named 'nope'" in results[1].text and "calculator" in results[1].text
    assert "expression" in results[2].text and "string" in results[2].text
    assert "expression" in results[3].text and "required" in results[3].text.lower()
    assert results[4].text == "no such record"


async def test_tool_deadline() -> None:
    async def hang() -> str:
        """Never returns."""
        await asyncio.sleep(60)
        return "late"

    tools = ToolRegistry([function_tool(hang, timeout=0.05)])
    h = Harness(tool_step(("hang", {})), text_step("it timed out"), tools=tools)
    cid = await h.conversation()
    await h.runtime.run_turn(cid, "wait")
    (result,) = (await h.messages(cid))[2].tool_results
    assert result.is_error and "deadline" in result.text
    (record,) = await h.store.list_tool_calls(cid)
    assert record.status == "timeout"


async def test_model_deadline_fails_the_turn() -> None:
    h = Harness(Step((TextDelta("slow"), Stop("end_turn")), delay=1.0), model_timeout=0.05)
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "hi")
    assert result.stop_reason == "failed" and "deadline" in (result.error or "")
    assert (await h.store.get_conversation(cid)).state == "failed"  # type: ignore[union-attr]
    assert "error" in h.bus.types()


async def test_stream_without_stop_is_an_error_not_end_turn() -> None:
    h = Harness(Step((TextDelta("cut"),)))
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "hi")
    assert result.stop_reason == "failed" and "stream_incomplete" in (result.error or "")


async def test_model_error_after_tools_answers_nothing_twice_and_fails() -> None:
    h = Harness(tool_step(("clock", {})), error_step(ContextTooLong("too long")))
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "time?")
    assert result.stop_reason == "failed"
    await h.messages(cid)  # history still valid
    # the conversation accepts a new message after a failure
    h.model.add(text_step("ok"))
    assert (await h.runtime.run_turn(cid, "again")).stop_reason == "end_turn"


async def test_budget_exhausted_makes_one_final_call_with_tools_off() -> None:
    h = Harness(
        tool_step(("calculator", {"expression": "1+1"})),
        tool_step(("calculator", {"expression": "2+2"})),
        text_step("Out of steps: 2 and 4 so far."),
        max_model_calls=2,
    )
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "count")
    assert result.stop_reason == "budget_exhausted"
    final = h.model.requests[-1]
    assert final.tool_choice == "none" and final.tools  # offered, but not to be used
    assert all(r.tool_choice == "auto" and r.tools for r in h.model.requests[:-1])
    rows = await h.messages(cid)
    assert rows[-1].text.startswith("Out of steps")
    assert rows[-1].metadata["stop_reason"] == "budget_exhausted"
    assert (await h.store.get_conversation(cid)).state == "idle"  # type: ignore[union-attr]
    h.model.assert_consumed()


async def test_tool_calls_in_the_wrap_up_call_are_answered_not_run() -> None:
    h = Harness(
        tool_step(("calculator", {"expression": "1+1"})),
        tool_step(("calculator", {"expression": "3+3"}), text="Still working."),
        max_model_calls=1,
    )
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "count")
    assert result.stop_reason == "budget_exhausted"
    rows = await h.messages(cid)
    assert "model calls" in rows[-1].tool_results[0].text
    assert result.metrics["tools"] == {"calculator": 1}


async def test_same_call_three_times_running_ends_crashed_with_a_wrap_up_sentence() -> None:
    call = ("calculator", {"expression": "1+1"})
    wrap_up = text_step("I kept computing 1+1 and it did not move me forward.")
    h = Harness(tool_step(call), tool_step(call), tool_step(call), wrap_up)
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "loop")
    assert result.stop_reason == "crashed"
    rows = await h.messages(cid)
    repeated = rows[-2]
    assert "3 times running" in repeated.tool_results[0].text
    assert repeated.text.startswith("Note: the turn was stopped")  # why tools are off
    assert rows[-1].role == "assistant" and rows[-1].text == wrap_up.events[0].text  # type: ignore[union-attr]
    assert rows[-1].metadata["stop_reason"] == "crashed"
    assert h.model.requests[-1].tool_choice == "none"  # the wrap-up call has tools off
    assert result.metrics["tools"] == {"calculator": 2}  # the third was never run
    assert result.metrics["model_calls"] == 4
    assert (await h.store.get_conversation(cid)).state == "idle"  # type: ignore[union-attr]
    h.model.assert_consumed()


async def test_same_reply_text_three_times_running_ends_crashed() -> None:
    h = Harness(
        tool_step(("calculator", {"expression": "1"}), text="Let me see."),
        tool_step(("calculator", {"expression": "2"}), text="Let me see."),
        tool_step(("calculator", {"expression": "3"}), text="Let me see."),
    )
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "loop")).stop_reason == "crashed"


async def test_varied_calls_do_not_trip_the_backstop() -> None:
    steps = [tool_step(("calculator", {"expression": f"{i}+1"})) for i in range(5)]
    h = Harness(*steps, text_step("done"))
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "go")).stop_reason == "end_turn"


async def test_same_error_twice_gets_one_nudge() -> None:
    h = Harness(
        tool_step(("calculator", {"expression": "1/0"})),
        tool_step(("calculator", {"expression": "2/0"}), text="again"),
        tool_step(("calculator", {"expression": "3/0"}), text="once more"),
        text_step("I give up"),
    )
    cid = await h.conversation()
    await h.runtime.run_turn(cid, "divide")
    rows = await h.messages(cid)
    tool_rows = [m for m in rows if m.role == "tool"]
    notes = [m.text for m in tool_rows]
    assert notes == ["", NUDGE, ""]  # the second identical error, once


async def test_max_tokens_inside_a_tool_call_never_runs_it() -> None:
    runs: list[str] = []

    async def record(value: str) -> str:
        """Records."""
        runs.append(value)
        return value

    cut = Step(
        (
            ToolCallStart(0, "c1", "record"),
            ToolCallDelta(0, '{"value": "par'),
            Usage(5, 100),
            Stop("max_tokens"),
        )
    )
    h = Harness(cut, text_step("sorry, cut off"), tools=ToolRegistry([function_tool(record)]))
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "go")
    assert result.stop_reason == "end_turn" and runs == []
    rows = await h.messages(cid)
    assert "cut off" in rows[2].tool_results[0].text and rows[2].tool_results[0].is_error


async def test_cancel_mid_tool_interrupts_and_keeps_what_was_committed() -> None:
    entered = asyncio.Event()
    cancelled = asyncio.Event()

    async def long_job(context: ToolContext) -> str:
        """Takes a while."""
        entered.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    h = Harness(tool_step(("long_job", {})), tools=ToolRegistry([function_tool(long_job)]))
    cid = await h.conversation()
    handle = await h.runtime.start_turn(cid, "start")
    await asyncio.wait_for(entered.wait(), 1)
    handle.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await handle.task
    assert cancelled.is_set()
    rows = await h.messages(cid)
    assert [m.role for m in rows] == ["user", "assistant", "tool"]
    assert "interrupted" in rows[2].tool_results[0].text
    (record,) = await h.store.list_tool_calls(cid)
    assert record.status == "interrupted"
    (turn,) = await h.store.list_turns(cid)
    assert turn.stop_reason == "cancelled"
    assert isinstance(h.bus.frames[-1], TurnFinished)
    assert (await h.store.get_conversation(cid)).state == "idle"  # type: ignore[union-attr]
    # the lock was released: the conversation takes a new turn
    h.model.add(text_step("hello again"))
    assert (await h.runtime.run_turn(cid, "next")).stop_reason == "end_turn"


async def test_a_call_cut_short_keeps_its_time_and_what_it_had_done() -> None:
    entered = asyncio.Event()

    async def ticking(context: ToolContext) -> str:
        """Prints as it goes."""
        try:
            entered.set()
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            assert context.cut_short is not None
            context.cut_short("tick 1\ntick 2")
            raise
        return "never"

    h = Harness(tool_step(("ticking", {})), tools=ToolRegistry([function_tool(ticking)]))
    cid = await h.conversation()
    handle = await h.runtime.start_turn(cid, "start")
    await asyncio.wait_for(entered.wait(), 1)
    await asyncio.sleep(0.05)
    handle.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await handle.task
    (record,) = await h.store.list_tool_calls(cid)
    assert record.status == "interrupted"
    assert record.duration_s is not None and record.duration_s >= 0.05
    assert record.result is not None and "tick 2" in record.result
    rows = await h.messages(cid)
    assert "tick 2" in rows[2].tool_results[0].text  # the model is told, and every surface
    (finished,) = [f for f in h.bus.frames if isinstance(f, ToolFinished)]
    assert finished.status == "interrupted"
    assert finished.duration_s == round(record.duration_s, 6)
    assert "tick 2" in finished.result


async def test_turns_of_one_conversation_never_overlap() -> None:
    active = 0
    peak = 0

    async def work(n: int) -> int:
        """Counts overlap."""
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return n

    steps = []
    for i in range(5):
        steps += [tool_step(("work", {"n": i})), text_step(f"done {i}")]
    h = Harness(*steps, tools=ToolRegistry([function_tool(work)]))
    cid = await h.conversation()
    results = await asyncio.gather(*(h.runtime.run_turn(cid, f"job {i}") for i in range(5)))
    assert [r.stop_reason for r in results] == ["end_turn"] * 5
    assert peak == 1
    rows = await h.messages(cid)
    users = [m.text for m in rows if m.role == "user"]
    assert users == [f"job {i}" for i in range(5)]  # arrival order
    assert [m.seq for m in rows] == list(range(1, len(rows) + 1))


async def test_history_of_earlier_turns_goes_into_the_request() -> None:
    h = Harness(text_step("one"), text_step("two"))
    cid = await h.conversation()
    await h.runtime.run_turn(cid, "first")
    await h.runtime.run_turn(cid, "second")
    request = h.model.requests[1]
    assert [m.text for m in request.messages] == ["first", "one", "second"]


async def test_client_message_id_is_echoed_on_the_user_row_frame() -> None:
    h = Harness(text_step("ok"))
    cid = await h.conversation()
    await h.runtime.run_turn(cid, "hi", client_message_id="abc")
    first = next(f for f in h.bus.frames if isinstance(f, MessageCommitted))
    assert first.client_message_id == "abc"
    assert first.message.metadata["client_message_id"] == "abc"


async def test_stream_turn_yields_frames_of_that_turn_only() -> None:
    h = Harness(text_step("a"), text_step("b"))
    cid = await h.conversation()
    first = asyncio.ensure_future(h.runtime.run_turn(cid, "one"))
    frames = [f async for f in h.runtime.stream_turn(cid, "two")]
    await first
    assert frames[0].type == "turn.started" and frames[-1].type == "turn.finished"
    assert len({f.run_id for f in frames}) == 1
    assert json.dumps([f.to_json() for f in frames])  # every frame is JSON-serialisable


async def test_an_unexpected_error_of_ours_fails_the_turn_instead_of_hanging_it() -> None:
    h = Harness(tool_step(("calculator", {"expression": "1+1"})), text_step("unused"))
    cid = await h.conversation()
    real_write = h.store.write
    calls = 0

    async def flaky_write(*ops: object) -> list[object]:
        nonlocal calls
        calls += 1
        if calls == 3:  # the step's tool results: the store refuses them once
            raise RuntimeError("disk on fire")
        return await real_write(*ops)  # type: ignore[arg-type]

    h.store.write = flaky_write  # type: ignore[method-assign]
    result = await h.runtime.run_turn(cid, "go")
    assert result.stop_reason == "failed" and "RuntimeError: disk on fire" in (result.error or "")
    assert "error" in h.bus.types()
    conversation = await h.store.get_conversation(cid)
    assert conversation is not None and conversation.state == "failed"  # not stuck running
    await h.messages(cid)  # the open call got an answer: history valid
