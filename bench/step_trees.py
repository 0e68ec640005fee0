"""The library's step, the same workload on any tree since f923f6e: for comparing this
tree with an older one under callgrind.

``bench/step_overhead.py --case`` measures this tree's modes; its options did not exist in
older trees. This script uses only what every tree since f923f6e has (``Runtime``,
``ScriptedModel``, ``open_store``, a function tool), with each tree's defaults, so one
command runs on each: a turn is K = 10 steps calling a trivial tool and a closing reply,
three turns of warm-up, then ``--turns`` turns, a fresh conversation every 20; the
process exits as soon as the last turn ends.

Run:  PYTHONPATH=<tree>/src valgrind --tool=callgrind python bench/step_trees.py \\
          --store memory|sqlite --turns N
Two runs (N1 and N2 turns) differ by the instructions of (N2 - N1) x 11 steps.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import tempfile

from ostinato.agents import AgentConfig
from ostinato.models.scripted import ScriptedModel, Step, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.store import open_store
from ostinato.tools.functions import function_tool

try:
    from ostinato.tools.registry import ToolRegistry
except ImportError:  # older trees
    from ostinato.tools.base import ToolRegistry  # type: ignore[attr-defined,no-redef]

K = 10
_ids = itertools.count()


async def noop(i: int) -> int:
    """Return its argument."""
    return i


def script() -> list[Step]:
    calls = [tool_step(("noop", {"i": i}, f"call_{next(_ids)}")) for i in range(K)]
    return [*calls, text_step("done")]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", choices=("memory", "sqlite"), default="memory")
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    url = "memory://" if args.store == "memory" else f"sqlite:///{tempfile.mkdtemp()}/s.db"
    store = await open_store(url)
    rt = Runtime(
        store,
        model=ScriptedModel(),
        tools=ToolRegistry([function_tool(noop)]),
        agent=AgentConfig(max_model_calls=K + 1),
    )
    conversation = await rt.create_conversation()
    for n in range(args.turns + 3):
        if n % 20 == 0:
            conversation = await rt.create_conversation()
        result = await rt.run_turn(conversation.id, "go", model=ScriptedModel(script()))
        assert result.stop_reason == "end_turn", result
    print(f"{args.store}: {args.turns} turns of {K + 1} steps", flush=True)
    # Out at once: an older tree's close can take a while (timers it waits out) that
    # would count as steps.
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main())
