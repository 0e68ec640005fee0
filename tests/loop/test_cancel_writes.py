"""A turn cancelled while one of its writes is in flight (issue 24).

A real store commits a write it was given whatever becomes of the caller (SQLite's
writer thread, PostgreSQL's group commit): the ``InFlight`` store here does the same,
and can hold one write until the test has cancelled the turn. The record must follow
what was written, so the teardown answers exactly the calls still open: before the fix,
a cancel while a result was written gave its call a second result ("interrupted"), and
one while the model's reply was written left its call with none. A result another
writer got in first is a lost race: the turn stops ``interrupted`` and the first stands.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from ostinato.agents import AgentConfig
from ostinato.messages import Message, ToolResultBlock
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.store.base import AppendMessage, WriteOp
from ostinato.store.inflight import settle_in_task
from ostinato.store.memory import MemoryStore
from ostinato.tools.base import ToolContext
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry
from tests.loop.harness import CheckingBus, assert_history_valid

Ops = tuple[WriteOp, ...]


class InFlight(MemoryStore):
    """Writes commit on their own once asked for, and a caller cancelled meanwhile is
    told what committed, as the SQLite and PostgreSQL stores do (``store.inflight``;
    tests/store/test_store_inflight.py); the first write ``hold`` matches waits for
    ``release`` (``held`` is set meanwhile)."""

    def __init__(self) -> None:
        super().__init__()
        self.hold: Callable[[Ops], bool] | None = None
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    async def write(self, *ops: WriteOp) -> list[Any]:
        return await settle_in_task(self._commit(ops)).wait()

    async def _commit(self, ops: Ops) -> list[Any]:
        if self.hold is not None and self.hold(ops):
            self.hold = None
            self.held.set()
            await self.release.wait()
        return await MemoryStore.write(self, *ops)


def _appends(ops: Ops, role: str, has: Callable[[Message], bool]) -> bool:
    return any(
        isinstance(op, AppendMessage) and op.message.role == role and has(op.message) for op in ops
    )


def results(ops: Ops) -> bool:
    return _appends(ops, "tool", lambda m: bool(m.tool_results))


def calls(ops: Ops) -> bool:
    return _appends(ops, "assistant", lambda m: bool(m.tool_uses))


async def quick(context: ToolContext) -> str:
    """Answers at once."""
    return "42"


def _runtime(store: MemoryStore, *tools: Any) -> Runtime:
    model = ScriptedModel([tool_step(("quick", {})), text_step("done")])
    registry = ToolRegistry([function_tool(t) for t in (quick, *tools)])
    return Runtime(store, model=model, tools=registry, agent=AgentConfig(), bus=CheckingBus(store))


async def _cancel_while_held(store: InFlight, runtime: Runtime) -> tuple[str, list[Message]]:
    cid = (await runtime.create_conversation()).id
    handle = await runtime.start_turn(cid, "go")
    await asyncio.wait_for(store.held.wait(), 5)
    handle.task.cancel()
    await asyncio.sleep(0.01)  # the cancel lands while the write is held
    store.release.set()
    with pytest.raises(asyncio.CancelledError):
        await handle.task
    rows = await store.list_messages(cid)
    assert_history_valid(rows)
    return cid, rows


def _answers(rows: list[Message]) -> list[tuple[str, str]]:
    return [(r.tool_use_id, r.text) for m in rows for r in m.tool_results]


async def test_a_cancel_while_a_result_is_written_keeps_that_one_result() -> None:
    store = InFlight()
    store.hold = results
    cid, rows = await _cancel_while_held(store, _runtime(store))
    (use,) = [u for m in rows for u in m.tool_uses]
    assert _answers(rows) == [(use.id, "42")]  # not also "interrupted: ..."
    (turn,) = await store.list_turns(cid)
    assert turn.stop_reason == "cancelled"
    (record,) = await store.list_tool_calls(cid)
    assert record.status == "ok"


async def test_a_cancel_while_the_reply_is_written_answers_its_call() -> None:
    store = InFlight()
    store.hold = calls
    cid, rows = await _cancel_while_held(store, _runtime(store))
    (use,) = [u for m in rows for u in m.tool_uses]
    ((answered, text),) = _answers(rows)  # not left without one
    assert answered == use.id and text.startswith("interrupted")
    (record,) = await store.list_tool_calls(cid)
    assert record.status == "interrupted"


async def test_a_result_someone_else_wrote_first_stands_and_the_turn_stops() -> None:
    """Another writer (recovery, judging this process gone) answers the call while it
    runs: the turn's own result is a lost race, and the turn ends ``interrupted``."""
    store = MemoryStore()

    async def taken(context: ToolContext) -> str:
        """Answered elsewhere while it runs."""
        row = Message("tool", (ToolResultBlock(context.tool_use_id, "outcome unknown"),))
        await store.write(AppendMessage(context.conversation_id, row, context.turn_id))
        return "mine"

    model = ScriptedModel([tool_step(("taken", {}))])
    registry = ToolRegistry([function_tool(taken)])
    bus = CheckingBus(store)
    runtime = Runtime(store, model=model, tools=registry, agent=AgentConfig(), bus=bus)
    cid = (await runtime.create_conversation()).id
    result = await runtime.run_turn(cid, "go")
    assert result.stop_reason == "interrupted" and "taken_over" in (result.error or "")
    rows = await store.list_messages(cid)
    assert_history_valid(rows)
    assert [text for _, text in _answers(rows)] == ["outcome unknown"]
    assert (await store.get_conversation(cid)).state == "idle"  # type: ignore[union-attr]


def answer(ops: Ops) -> bool:
    return _appends(ops, "assistant", lambda m: not m.tool_uses and m.text == "done")


async def test_a_final_answer_and_the_turn_end_are_one_write() -> None:
    """The last reply of a turn that needs nothing more is committed with the turn's end,
    and its frame and ``turn.finished`` are announced together, in that order."""
    store = InFlight()
    writes: list[Ops] = []
    store.hold = lambda ops: writes.append(ops) and False
    runtime = _runtime(store)
    bus = runtime.bus
    assert isinstance(bus, CheckingBus)
    cid = (await runtime.create_conversation()).id
    assert (await runtime.run_turn(cid, "go")).stop_reason == "end_turn"
    (last,) = [ops for ops in writes if answer(ops)]
    assert [type(op).__name__ for op in last] == ["AppendMessage", "FinishTurn"]
    row, end = last
    assert row.message.metadata["metrics"] == end.metrics  # type: ignore[union-attr]
    assert bus.types()[-2:] == ["message", "turn.finished"]
    (turn,) = await store.list_turns(cid)
    assert turn.stop_reason == "end_turn" and turn.metrics == end.metrics  # type: ignore[union-attr]


async def test_a_cancel_while_the_final_answer_is_written_leaves_the_turn_ended() -> None:
    """The answer and the end commit together, so a cancel that lands while that write
    is in flight finds the turn ended: the end stands, and nothing is written after it."""
    store = InFlight()
    store.hold = answer
    runtime = _runtime(store)
    bus = runtime.bus
    assert isinstance(bus, CheckingBus)
    cid, rows = await _cancel_while_held(store, runtime)
    assert [m.text for m in rows if m.role == "assistant" and not m.tool_uses] == ["done"]
    (turn,) = await store.list_turns(cid)
    assert turn.stop_reason == "end_turn"
    ends = [f for f in bus.frames if f.type == "turn.finished"]
    assert [f.stop_reason for f in ends] == ["end_turn"]  # type: ignore[attr-defined]
    assert (await store.get_conversation(cid)).state == "idle"  # type: ignore[union-attr]
