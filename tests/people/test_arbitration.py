"""One active turn per conversation: queue, supersede, reject; cancel."""

from __future__ import annotations

import asyncio

import pytest

from ostinato.errors import Conflict
from ostinato.models.base import Stop, TextDelta
from ostinato.models.scripted import Step, text_step, tool_step
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry
from tests.loop.harness import Harness


def overlap_tools() -> tuple[ToolRegistry, dict[str, int]]:
    seen = {"active": 0, "peak": 0}

    async def work(n: int) -> int:
        """Counts overlapping turns."""
        seen["active"] += 1
        seen["peak"] = max(seen["peak"], seen["active"])
        await asyncio.sleep(0.005)
        seen["active"] -= 1
        return n

    return ToolRegistry([function_tool(work)]), seen


async def test_twenty_simultaneous_messages_are_stored_once_and_run_in_order() -> None:
    registry, seen = overlap_tools()
    steps = []
    for i in range(20):
        steps += [tool_step(("work", {"n": i})), text_step(f"done {i}")]
    h = Harness(*steps, tools=registry)
    cid = await h.conversation()
    submissions = await asyncio.gather(*(h.runtime.submit(cid, f"job {i}") for i in range(20)))
    results = await asyncio.gather(*(s.handle() for s in submissions))
    finished = await asyncio.gather(*(r.result() for r in results))
    assert [f.stop_reason for f in finished] == ["end_turn"] * 20
    assert seen["peak"] == 1  # never two turns at once
    rows = await h.messages(cid)
    users = [m.text for m in rows if m.role == "user"]
    assert users == [f"job {i}" for i in range(20)]  # stored once each, in arrival order
    assert [m.seq for m in rows] == list(range(1, len(rows) + 1))
    assert await h.store.list_queued(cid) == []  # every queued one was taken
    assert sum(1 for s in submissions if s.queued is not None) == 19
    h.model.assert_consumed()


async def test_reject_refuses_while_busy_and_stores_nothing() -> None:
    slow = Step((TextDelta("working "), TextDelta("on it"), Stop("end_turn")), delay=0.05)
    h = Harness(slow)
    cid = await h.conversation()
    first = await h.runtime.start_turn(cid, "long one")
    with pytest.raises(Conflict, match="reject"):
        await h.runtime.submit(cid, "impatient", policy="reject")
    await first.result()
    assert [m.text for m in await h.messages(cid) if m.role == "user"] == ["long one"]
    assert await h.store.list_queued(cid) == []


async def test_supersede_cancels_the_running_turn_then_runs() -> None:
    slow = Step((*tuple(TextDelta(f"w{i} ") for i in range(200)), Stop("end_turn")), delay=0.01)
    h = Harness(slow, text_step("fresh answer"))
    cid = await h.conversation()
    subscription = h.bus.subscribe(cid)
    first = await h.runtime.start_turn(cid, "long one")
    while (await subscription.get(within=5)).type != "text.delta":
        pass  # the first reply has begun to show
    subscription.close()
    second = await h.runtime.submit(cid, "new question", policy="supersede")
    assert first.task.cancelled()  # teardown was awaited before submit returned
    result = await (await second.handle()).result()
    assert result.stop_reason == "end_turn"
    turns = sorted(await h.store.list_turns(cid), key=lambda t: t.started_at)
    assert [t.stop_reason for t in turns] == ["cancelled", "end_turn"]
    rows = await h.messages(cid)
    # the superseded reply keeps what it showed, marked partial; nothing else half-written
    assert [m.role for m in rows] == ["user", "assistant", "user", "assistant"]
    assert rows[1].metadata["partial"] is True and rows[1].text.startswith("w0 ")


async def test_cancel_reaches_a_running_tool() -> None:
    started, stopped = asyncio.Event(), asyncio.Event()

    async def long_job() -> str:
        """Takes long."""
        started.set()
        try:
            await asyncio.sleep(30)
        finally:
            stopped.set()
        return "never"

    h = Harness(tool_step(("long_job", {})), tools=ToolRegistry([function_tool(long_job)]))
    cid = await h.conversation()
    handle = await h.runtime.start_turn(cid, "go")
    await asyncio.wait_for(started.wait(), 1)
    outcome = await h.runtime.cancel(cid)
    assert outcome.cancelled_turn == handle.turn.id and stopped.is_set()
    assert h.bus.types()[-1] == "turn.finished"
    assert (await h.store.get_turn(handle.turn.id)).stop_reason == "cancelled"  # type: ignore[union-attr]
    with pytest.raises(Conflict, match="nothing to cancel"):
        await h.runtime.cancel(cid)
