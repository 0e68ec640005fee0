"""Shutting down (``Runtime.drain`` / ``close``) and the queue's order (``turns.Worker``).

A shutdown begins no new turn, lets running turns end within the grace, then cancels
the rest so that each records its end; a message waiting in a queue stays stored.
Queued messages begin in the order of their store position, whatever order their
writes finished in.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ostinato.errors import ShuttingDown
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.store.base import Enqueue
from ostinato.store.memory import MemoryStore
from ostinato.submissions import TurnHandle
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry
from ostinato.turns import QUEUED_KEPT
from tests.loop.harness import Harness
from tests.people.test_approvals import RUNS, harness, start


async def ended(h: Harness, handle: TurnHandle) -> str | None:
    """How a turn that has ended says it ended (a cancelled one's task was cancelled)."""
    await asyncio.wait([handle.task])
    turn = await h.store.get_turn(handle.turn.id)
    assert turn is not None and turn.status == "finished"
    return turn.stop_reason


def gated() -> tuple[ToolRegistry, asyncio.Event, asyncio.Event]:
    """A tool that says it started, then waits for the test's gate."""
    started, gate = asyncio.Event(), asyncio.Event()

    async def job() -> str:
        """Waits for the gate."""
        started.set()
        await gate.wait()
        return "job done"

    return ToolRegistry([function_tool(job)]), started, gate


async def test_closing_cancels_a_running_turn_and_records_its_end() -> None:
    """``Worker.run`` once lost its running turn when cancelled: the turn stayed
    ``running`` in the store and its tool ran on."""
    registry, started, _ = gated()
    h = Harness(tool_step(("job", {})), tools=registry)
    cid = await h.conversation()
    handle = await h.runtime.start_turn(cid, "go")
    await asyncio.wait_for(started.wait(), 5)
    await h.runtime.close()
    assert handle.task.cancelled()
    turn = await h.store.get_turn(handle.turn.id)
    assert turn is not None and turn.stop_reason == "cancelled"
    rows = await h.messages(cid)
    assert "interrupted" in rows[-1].tool_results[0].text
    assert (await h.store.get_conversation(cid)).state == "idle"  # type: ignore[union-attr]


async def test_a_turn_that_ends_within_the_grace_ends_as_usual() -> None:
    registry, started, gate = gated()
    h = Harness(tool_step(("job", {})), text_step("all done"), tools=registry)
    cid, other = await h.conversation(), await h.conversation()
    handle = await h.runtime.start_turn(cid, "go")
    await asyncio.wait_for(started.wait(), 5)
    draining = asyncio.ensure_future(h.runtime.drain(60))
    await asyncio.sleep(0)
    assert h.runtime.draining
    with pytest.raises(ShuttingDown) as refused:
        await h.runtime.submit(other, "hello")
    assert refused.value.retry_after is not None and refused.value.retry_after > 0
    assert await h.store.list_messages(other) == []  # nothing stored
    gate.set()
    await asyncio.wait_for(draining, 10)
    assert (await handle.result()).stop_reason == "end_turn"
    assert (await h.messages(cid))[-1].text == "all done"


async def test_what_outlives_the_grace_is_cancelled_and_the_queue_is_kept() -> None:
    registry, started, _ = gated()
    h = Harness(tool_step(("job", {})), tools=registry)
    cid = await h.conversation()
    handle = await h.runtime.start_turn(cid, "go")
    await asyncio.wait_for(started.wait(), 5)
    queued = await h.runtime.submit(cid, "and then this")
    assert queued.queued is not None
    await h.runtime.drain(0.01)
    assert await ended(h, handle) == "cancelled"
    with pytest.raises(ShuttingDown, match="stays in the conversation's queue") as kept:
        await queued.handle()
    assert kept.value.message == QUEUED_KEPT and kept.value.retry_after is None
    assert [q.id for q in await h.store.list_queued(cid)] == [queued.queued.id]
    assert (await h.store.get_conversation(cid)).state == "idle"  # type: ignore[union-attr]
    await h.messages(cid)  # every call answered


async def test_a_second_signal_cuts_the_grace_short() -> None:
    registry, started, _ = gated()
    h = Harness(tool_step(("job", {})), tools=registry)
    cid = await h.conversation()
    handle = await h.runtime.start_turn(cid, "go")
    await asyncio.wait_for(started.wait(), 5)
    hurry = asyncio.Event()
    draining = asyncio.ensure_future(h.runtime.drain(3600, hurry=hurry))
    await asyncio.sleep(0)
    hurry.set()
    await asyncio.wait_for(draining, 10)  # not an hour
    assert await ended(h, handle) == "cancelled"


class SlowQueueStore(MemoryStore):
    """Holds every queue write's answer until the test lets it go, in any order it
    likes (on PostgreSQL, concurrent writes commit in no particular order)."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[asyncio.Future[None]] = []

    async def write(self, *ops: Any) -> list[Any]:
        results = await super().write(*ops)
        if any(isinstance(op, Enqueue) for op in ops):
            gate = asyncio.get_running_loop().create_future()
            self.held.append(gate)
            await gate
        return results


async def test_queued_messages_run_in_the_order_of_their_positions() -> None:
    registry, started, gate = gated()
    steps = [tool_step(("job", {})), text_step("first")]
    steps += [text_step(f"answer {i}") for i in range(5)]
    store = SlowQueueStore()
    runtime = Runtime(store, model=ScriptedModel(steps), tools=registry)
    cid = (await runtime.create_conversation()).id
    first = await runtime.start_turn(cid, "first")
    await asyncio.wait_for(started.wait(), 5)
    sends = [asyncio.ensure_future(runtime.submit(cid, f"message {i}")) for i in range(5)]
    for _ in range(100):
        if len(store.held) == 5:
            break
        await asyncio.sleep(0)
    assert len(store.held) == 5
    for held in reversed(store.held):  # the last written answers first
        held.set_result(None)
        await asyncio.sleep(0)
    submissions = await asyncio.gather(*sends)
    positions = [s.queued.position for s in submissions if s.queued is not None]
    assert positions == sorted(positions)
    gate.set()
    await first.result()
    for submission in submissions:
        await (await submission.handle()).result()
    users = [m.text for m in await store.list_messages(cid) if m.role == "user"]
    assert users == ["first"] + [f"message {i}" for i in range(5)]
    await runtime.close()


async def test_a_decision_the_running_turn_waits_for_is_still_taken_while_draining() -> None:
    h = harness(tool_step(("deploy", {"target": "prod"})), text_step("deployed"))
    cid, task, frame = await start(h)
    draining = asyncio.ensure_future(h.runtime.drain(60))
    await asyncio.sleep(0)
    await h.runtime.decide(cid, frame.approval_id, approve=True)
    await asyncio.wait_for(draining, 10)
    result = await task
    assert result.stop_reason == "end_turn" and RUNS == ["prod"]
