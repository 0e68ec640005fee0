"""Forged tools: what a call costs, and what a tool burning its CPU limit does to the
turns of other conversations.

- ``trial (cold)``: the first run, which starts a worker process;
- ``call (warm)``: a forged tool called through a whole turn (scripted model: one tool
  call, then an answer), on a warm worker;
- ``parallel turn, idle`` / ``parallel turn, burning``: the latency of a plain turn in
  conversation B (the model answers at once), alone (for 5 s), then while conversation
  A's forged tool runs ``for (;;) {}`` until the sandbox stops it at its CPU limit,
  ``--burns`` times in a row; the other conversation's turns run one after another for
  the whole of it (every one of them while a worker burns). The server's event loop
  does not run the code (a worker process does), so the second figure should stay close
  to the first; what it measures is the machine's CPU being shared with the burning
  worker.

Run: ``python bench/forge.py [--turns N] [--cpu-s S] [--burns B]``. Prints medians, p95s
and maxima, and the load average before and after (the figures mean little on a machine
that is busy with other work).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.store.base import Conversation
from ostinato.store.forged import SaveForgedTool
from ostinato.store.memory import MemoryStore
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.forge import Limits, Sandbox
from ostinato.tools.forge.tools import forge_tools, forged_source
from ostinato.tools.mounting import Mount, Source

SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
IDLE_S = 5.0  # seconds of plain turns, no burn


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
    return (
        f"median {statistics.median(ordered) * 1000:8.2f} ms   p95 {p95 * 1000:8.2f} ms"
        f"   max {ordered[-1] * 1000:8.2f} ms   (n={len(ordered)})"
    )


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


class Models:
    """One scripted model per conversation, so two conversations never share steps."""

    def __init__(self) -> None:
        self.by_id: dict[str, ScriptedModel] = {}

    def __call__(self, conversation: Conversation) -> ScriptedModel:
        return self.by_id.setdefault(conversation.id, ScriptedModel())


async def _turns(runtime: Runtime, model: ScriptedModel, cid: str, count: int) -> list[float]:
    times = []
    for _ in range(count):
        model.add(text_step("ok"))
        start = time.perf_counter()
        await runtime.run_turn(cid, "hello")
        times.append(time.perf_counter() - start)
    return times


async def main(turns: int, cpu_s: float, burns: int) -> None:
    print(f"before: {_load()}")
    store = MemoryStore()
    sandbox = Sandbox(limits=Limits(cpu_s=cpu_s, wall_s=cpu_s * 10 + 10))
    models = Models()
    tools = [*builtin_tools(), *forge_tools(store, sandbox)]
    runtime = Runtime(
        store,
        model=models,
        mount=Mount([Source("builtins", tools, builtin=True), forged_source(store, sandbox)]),
        sandbox=sandbox,
    )
    await store.write(SaveForgedTool("ann", "burn", "Burn CPU.", SCHEMA, "() => { for (;;) {} }"))
    await store.write(SaveForgedTool("ann", "echo", "Echo.", SCHEMA, "(a) => a"))
    start = time.perf_counter()
    await sandbox.run("() => 1", {})
    print(f"trial (cold):              {(time.perf_counter() - start) * 1000:8.2f} ms")

    a = await runtime.create_conversation(owner="ann")
    b = await runtime.create_conversation(owner="bob")
    calls = []
    for _ in range(turns):
        models(a).add(tool_step(("my_echo", {"x": 1})), text_step("done"))
        start = time.perf_counter()
        await runtime.run_turn(a.id, "echo")
        calls.append(time.perf_counter() - start)
    print(f"call (warm, whole turn):   {_ms(calls)}")

    idle: list[float] = []
    until = time.perf_counter() + IDLE_S
    while time.perf_counter() < until:  # as many as the burning phase has, about
        idle += await _turns(runtime, models(b), b.id, 1)
    print(f"parallel turn, idle:       {_ms(idle)}")

    async def burn() -> float:
        start = time.perf_counter()
        for _ in range(burns):
            models(a).add(tool_step(("my_burn", {})), text_step("burnt"))
            await runtime.run_turn(a.id, "burn")
        return time.perf_counter() - start

    burner = asyncio.ensure_future(burn())
    await asyncio.sleep(0.5)  # the burning worker is running
    busy: list[float] = []
    while not burner.done():
        busy += await _turns(runtime, models(b), b.id, 1)
    burned = await burner
    print(
        f"parallel turn, burning:    {_ms(busy)}   ({burns} burns of {cpu_s:g} s CPU, "
        f"{burned:.1f} s)"
    )
    await runtime.close()
    print(f"after: {_load()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--cpu-s", type=float, default=2.0)
    parser.add_argument("--burns", type=int, default=3)
    options = parser.parse_args()
    asyncio.run(main(options.turns, options.cpu_s, options.burns))
