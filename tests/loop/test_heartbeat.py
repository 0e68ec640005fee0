"""A long tool that reports nothing gets heartbeat frames; one that reports does not."""

from __future__ import annotations

import asyncio

from ostinato.frames import ToolProgress
from ostinato.models.scripted import text_step, tool_step
from ostinato.tools.base import ToolContext
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry
from tests.loop.harness import Harness


async def test_heartbeats_for_quiet_tools_and_progress_for_talking_ones() -> None:
    async def quiet() -> str:
        """Silent."""
        await asyncio.sleep(0.25)
        return "ok"

    async def talker(context: ToolContext) -> str:
        """Reports."""
        for i in range(5):
            assert context.progress is not None
            context.progress(f"step {i}")
            await asyncio.sleep(0.05)
        return "ok"

    tools = ToolRegistry([function_tool(quiet), function_tool(talker)])
    h = Harness(
        tool_step(("quiet", {}), ("talker", {})),
        text_step("done"),
        tools=tools,
        heartbeat_interval=0.06,
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
