"""A long tool that reports nothing gets heartbeat frames; one that reports does not; one
waiting for a person gets none until it runs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ostinato.approvals import ApprovalPolicy, Ending
from ostinato.frames import ApprovalRequested, ToolProgress
from ostinato.loop import heartbeat as heartbeat_module
from ostinato.loop.heartbeat import Heartbeat
from ostinato.loop.tools import run_tool
from ostinato.messages import ToolUseBlock
from ostinato.models.scripted import text_step, tool_step
from ostinato.store.base import Turn, utcnow
from ostinato.tools.base import Tool, ToolContext
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry
from tests.loop.harness import Harness


async def test_heartbeats_for_quiet_tools_and_progress_for_talking_ones() -> None:
    async def quiet() -> str:
        """Silent."""
        await asyncio.sleep(0.8)  # beats at 0.3 and 0.6 s, with room for a loaded machine
        return "ok"

    async def talker(context: ToolContext) -> str:
        """Reports."""
        for i in range(5):
            assert context.progress is not None
            context.progress(f"step {i}")
            await asyncio.sleep(0.01)  # well inside the interval: it never goes quiet
        return "ok"

    tools = ToolRegistry([function_tool(quiet), function_tool(talker)])
    h = Harness(
        tool_step(("quiet", {}), ("talker", {})),
        text_step("done"),
        tools=tools,
        heartbeat_interval=0.3,
    )
    cid = await h.conversation()
    await h.runtime.run_turn(cid, "go")
    frames = [f for f in h.bus.frames if isinstance(f, ToolProgress)]
    quiet_beats = [f for f in frames if f.name == "quiet"]
    talk = [f for f in frames if f.name == "talker"]
    assert quiet_beats and all(f.heartbeat for f in quiet_beats)
    assert quiet_beats[0].text.startswith("still running")
    assert [f.text for f in talk if not f.heartbeat] == [f"step {i}" for i in range(5)]
    assert not any(f.heartbeat for f in talk)  # it kept reporting


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


async def test_beats_are_deferred_while_a_call_waits_for_a_person(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    monkeypatch.setattr(heartbeat_module, "time", clock)
    beats: list[tuple[str, float]] = []
    heartbeat = Heartbeat(lambda i, name, seconds: beats.append((i, seconds)), interval=5.0)
    heartbeat.start("c1", "deploy")
    heartbeat.waiting("c1")  # an approval card is up
    clock.now += 60
    heartbeat._tick()
    assert beats == []  # the card says what it waits on
    heartbeat.resumed("c1")  # approved: the call runs
    clock.now += 2
    heartbeat._tick()
    assert beats == []  # a full interval after the wait first
    clock.now += 3
    heartbeat._tick()
    assert beats == [("c1", 5.0)]  # counted from when it began to run
    heartbeat.stop()


async def test_run_tool_says_when_a_call_waits_for_consent() -> None:
    said: list[bool] = []

    class Asking:
        def required(self, tool: Tool) -> bool:
            return True

        def took_in(self, tool: Tool) -> None:
            pass

        async def ask(self, turn: Turn, call: ToolUseBlock, tool: Tool, **_: Any) -> Ending:
            assert said == [True]  # waiting while the person is asked
            return Ending.APPROVED

    catalog = ToolRegistry(builtin_tools()).catalog()
    turn = Turn("t", "c", "r", "running", utcnow())
    call = ToolUseBlock("u1", "clock", {})
    run = await run_tool(call, catalog, turn, consent=Asking(), waiting=said.append)
    assert run.status == "ok" and said == [True, False]


async def test_the_loop_defers_beats_while_a_call_waits_for_approval() -> None:
    """Through a turn (loop/running.py tells its Heartbeat when run_tool waits): no beat
    while the approval card is up, beats again once the approved call runs quietly."""

    async def deploy(target: str) -> str:
        """Deploy to a target.

        Args:
            target: Where to deploy.
        """
        await asyncio.sleep(0.3)  # six intervals without a word
        return f"deployed {target}"

    tools = ToolRegistry([function_tool(deploy, risk="exec", idempotent=False)])
    steps = (tool_step(("deploy", {"target": "prod"})), text_step("done"))
    h = Harness(*steps, tools=tools, heartbeat_interval=0.05)
    h.runtime.consent.policy = ApprovalPolicy(timeout=30)
    cid = await h.conversation()
    watcher = h.bus.subscribe(cid)
    turn = asyncio.ensure_future(h.runtime.run_turn(cid, "ship it"))
    card = None
    async for frame in watcher:
        if isinstance(frame, ApprovalRequested):
            card = frame
            break
    assert card is not None
    await asyncio.sleep(0.3)  # the card is up for six intervals
    assert [f for f in h.bus.frames if isinstance(f, ToolProgress)] == []
    await h.runtime.decide(cid, card.approval_id, approve=True)
    assert (await turn).stop_reason == "end_turn"
    beats = [f for f in h.bus.frames if isinstance(f, ToolProgress)]
    assert beats and all(f.heartbeat and f.name == "deploy" for f in beats)
