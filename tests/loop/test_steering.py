"""Steering a running turn (``loop.steering``): a message sent with ``steer`` while a
turn runs is taken by that turn at its next step boundary (its tool results written,
its next model call not yet made) and written as a user row the next call sees; one no
step takes runs as the next turn. On the in-memory store, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ostinato.agents import AgentConfig
from ostinato.bus import Subscription
from ostinato.frames import Frame, InputQueued, MessageCommitted
from ostinato.messages import user_text
from ostinato.models.base import ModelRequest
from ostinato.models.scripted import ScriptedModel, Step, text_step, tool_step
from ostinato.queueing import steer_marked
from ostinato.runtime import Runtime
from ostinato.store.base import Enqueue, QueuedInput, Store, utcnow
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry
from tests.loop.harness import assert_history_valid
from tests.store.conftest import _open, postgres_url

__all__ = ["postgres_url"]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened = await _open(request.param, tmp_path, request)
    yield opened
    await opened.close()


class Gate:
    """A ``wait`` tool that is running until the test lets it finish."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    def registry(self) -> ToolRegistry:
        async def wait(label: str) -> str:
            """Wait for a signal.

            Args:
                label: What is waited for.
            """
            self.entered.set()
            await self.release.wait()
            return f"done {label}"

        return ToolRegistry([function_tool(wait)])


def runtime_for(store: Store, gate: Gate, *steps: Step) -> tuple[Runtime, ScriptedModel]:
    model = ScriptedModel(list(steps))
    return Runtime(store, model=model, tools=gate.registry(), agent=AgentConfig()), model


def texts(request: ModelRequest) -> list[tuple[str, str]]:
    """The request's messages as (role, text or the kind of block)."""
    out = []
    for message in request.messages:
        if message.tool_results:
            out.append((message.role, "tool_result"))
        elif message.tool_uses:
            out.append((message.role, "tool_use"))
        else:
            out.append((message.role, message.text))
    return out


async def test_a_steered_message_reaches_the_next_model_call_after_the_tool_results(
    store: Store,
) -> None:
    gate = Gate()
    runtime, model = runtime_for(
        store, gate, tool_step(("wait", {"label": "a"})), text_step("Both done.")
    )
    try:
        cid = (await runtime.create_conversation()).id
        seen = runtime.bus.subscribe(cid)
        first = await runtime.start_turn(cid, "start")
        await asyncio.wait_for(gate.entered.wait(), 5)
        steered = await runtime.submit(cid, "and also this", policy="steer", client_message_id="s1")
        assert steered.queued is not None and steered.queued.steer  # stored at once
        assert not steered.started.done()  # never inside the tool call
        assert [q.id for q in await store.list_queued(cid)] == [steered.queued.id]
        gate.release.set()
        result = await asyncio.wait_for(first.result(), 10)
        assert result.stop_reason == "end_turn"
        handle = await asyncio.wait_for(steered.handle(), 5)
        assert handle.run_id == first.run_id  # its sender follows the turn that took it
        second = model.requests[1]
        assert texts(second)[-3:] == [
            ("assistant", "tool_use"),
            ("tool", "tool_result"),
            ("user", "and also this"),
        ]
        assert await store.list_queued(cid) == []
        (turn,) = await store.list_turns(cid)
        rows = await store.list_messages(cid)
        assert_history_valid(rows)
        (row,) = [r for r in rows if r.text == "and also this"]
        assert row.role == "user" and row.metadata.get("steered") is True
        assert row.metadata.get("client_message_id") == "s1" and "steer" not in row.metadata
        assert [r.role for r in rows] == ["user", "assistant", "tool", "user", "assistant"]
        frames = [f async for f in _drain(seen)]
        queued = [f for f in frames if isinstance(f, InputQueued)]
        assert queued and queued[0].steer
        shown = [f for f in frames if isinstance(f, MessageCommitted) and f.message.seq == row.seq]
        assert shown and shown[0].client_message_id == "s1" and shown[0].run_id == turn.run_id
    finally:
        await runtime.close()


async def test_several_steered_messages_are_taken_in_order_at_one_boundary(
    store: Store,
) -> None:
    gate = Gate()
    runtime, model = runtime_for(
        store, gate, tool_step(("wait", {"label": "a"})), text_step("Noted.")
    )
    try:
        cid = (await runtime.create_conversation()).id
        first = await runtime.start_turn(cid, "start")
        await asyncio.wait_for(gate.entered.wait(), 5)
        for text in ("one", "two", "three"):
            await runtime.submit(cid, text, policy="steer")
        gate.release.set()
        await asyncio.wait_for(first.result(), 10)
        assert [t for _, t in texts(model.requests[1])][-3:] == ["one", "two", "three"]
        assert len(await store.list_turns(cid)) == 1
        model.assert_consumed()
    finally:
        await runtime.close()


async def test_a_steered_message_is_not_lost_when_the_turn_ends_with_its_answer(
    store: Store,
) -> None:
    answered = asyncio.Event()

    def hold(request: ModelRequest) -> None:
        answered.set()

    first_step = Step(text_step("Here it is.").events, delay=0.05, expect=hold)
    model = ScriptedModel([first_step, text_step("And now the steered one.")])
    runtime = Runtime(store, model=model, tools=ToolRegistry([]), agent=AgentConfig())
    try:
        cid = (await runtime.create_conversation()).id
        first = await runtime.start_turn(cid, "question")
        await asyncio.wait_for(answered.wait(), 5)  # its last model call is under way
        steered = await runtime.submit(cid, "late addition", policy="steer")
        await asyncio.wait_for(first.result(), 10)
        second = await asyncio.wait_for(steered.handle(), 10)
        assert second.run_id != first.run_id  # it ran as the next turn
        result = await asyncio.wait_for(second.result(), 10)
        assert result.stop_reason == "end_turn"
        assert texts(model.requests[1])[-1] == ("user", "late addition")
        rows = await store.list_messages(cid)
        assert [r.text for r in rows] == [
            "question",
            "Here it is.",
            "late addition",
            "And now the steered one.",
        ]
        assert "steer" not in rows[2].metadata and "steered" not in rows[2].metadata
        assert await store.list_queued(cid) == []
    finally:
        await runtime.close()


async def test_steer_with_no_turn_running_starts_a_turn(store: Store) -> None:
    model = ScriptedModel([text_step("Hi.")])
    runtime = Runtime(store, model=model, tools=ToolRegistry([]), agent=AgentConfig())
    try:
        cid = (await runtime.create_conversation()).id
        submission = await runtime.submit(cid, "hello", policy="steer")
        assert submission.queued is None
        result = await (await submission.handle()).result()
        assert result.stop_reason == "end_turn"
    finally:
        await runtime.close()


async def test_a_steered_message_written_to_the_store_by_another_process_is_taken(
    store: Store,
) -> None:
    """The running turn reads the store at its step boundary: a steered message that no
    worker of this process knows about (another server's) is taken all the same."""
    gate = Gate()
    runtime, model = runtime_for(
        store, gate, tool_step(("wait", {"label": "a"})), text_step("Seen.")
    )
    try:
        cid = (await runtime.create_conversation()).id
        first = await runtime.start_turn(cid, "start")
        await asyncio.wait_for(gate.entered.wait(), 5)
        message = steer_marked(user_text("from elsewhere"))
        await store.write(Enqueue(QueuedInput("q-elsewhere", cid, message, utcnow())))
        gate.release.set()
        await asyncio.wait_for(first.result(), 10)
        assert texts(model.requests[1])[-1] == ("user", "from elsewhere")
        assert await store.list_queued(cid) == []
    finally:
        await runtime.close()


async def _drain(subscription: Subscription) -> AsyncIterator[Frame]:
    while (frame := subscription.take()) is not None:
        yield frame


async def test_an_edit_sent_with_steer_waits_like_a_queued_one(store: Store) -> None:
    gate = Gate()
    runtime, model = runtime_for(
        store,
        gate,
        text_step("First."),
        tool_step(("wait", {"label": "a"})),
        text_step("Ok."),
        text_step("Edited."),
    )
    try:
        cid = (await runtime.create_conversation()).id
        await runtime.run_turn(cid, "first")
        running = await runtime.start_turn(cid, "second")
        await asyncio.wait_for(gate.entered.wait(), 5)
        first_row = (await store.list_messages(cid))[0]
        assert first_row.seq is not None
        edit = await runtime.edit(cid, first_row.seq, "first, edited", policy="steer")
        assert edit.queued is not None and not edit.queued.steer  # it forks: it waits
        gate.release.set()
        await asyncio.wait_for(running.result(), 10)
        assert "first, edited" not in [t for _, t in texts(model.requests[2])]
        edited = await asyncio.wait_for((await edit.handle()).result(), 10)
        assert edited.stop_reason == "end_turn"
        assert texts(model.requests[3])[-1] == ("user", "first, edited")
    finally:
        await runtime.close()
