"""What the turn-zero seed (the memory recall keyed on the user's message) costs a turn.

One process, a SQLite file, a scripted model that answers in one chunk: each turn is a
new conversation's first message, as in ``bench/serve_load.py``'s sequential run. Two
runtimes on the same store take turns, one with the seed and one without
(``Runtime(seed_recall=False)``), ``--rounds`` rounds of ``--turns`` turns each; each
prints the event loop thread's CPU per turn (``time.thread_time``: the SQLite writer
commits on that thread; the WAL's fsync thread is left out), median of the rounds, and
the difference is the seed's.

Then the recall's search alone, inside those turns (``store.search_memories``' CPU per
turn), for an owner with no facts while ``--others`` facts of other owners match the
message's words (0 by default: a new server), and for an owner with ``--facts`` facts.

Run:  python bench/seed_cost.py [--turns 300] [--rounds 7] [--others 200] [--facts 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ostinato.agents import AgentConfig
from ostinato.memory.facts import Memory
from ostinato.memory.tools import memory_tools
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.store.base import RememberFact
from ostinato.store.sql.sqlite import SQLiteStore
from ostinato.tools.registry import ToolRegistry

TEXT = "What is the weather like in Paris today?"
OWNER = "ann"


def runtime(store: SQLiteStore, seed: bool) -> Runtime:
    tools = ToolRegistry(memory_tools(store))
    return Runtime(
        store,
        model=ScriptedModel(),
        tools=tools,
        agent=AgentConfig(),
        memory=Memory(store),
        seed_recall=seed,
    )


async def turns(rt: Runtime, n: int) -> float:
    """µs of this thread's CPU per turn, each turn a new conversation's first message."""
    started = time.thread_time()
    for _ in range(n):
        conversation = await rt.create_conversation(owner=OWNER)
        result = await rt.run_turn(conversation.id, TEXT, model=ScriptedModel([text_step("ok")]))
        assert result.stop_reason == "end_turn", result
    return (time.thread_time() - started) / n * 1e6


async def per_turn(directory: Path, n: int, rounds: int) -> None:
    store = await SQLiteStore.open(directory / "seed.db")
    try:
        runs = {"seed": runtime(store, True), "none": runtime(store, False)}
        for rt in runs.values():
            await turns(rt, 20)  # warm-up
        figures: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(rounds):
            for name, rt in runs.items():
                figures[name].append(await turns(rt, n))
        medians = {name: statistics.median(v) for name, v in figures.items()}
        for name, median in medians.items():
            each = ", ".join(f"{v:.0f}" for v in figures[name])
            print(f"{name:5s} CPU per turn {median:7.1f} µs  ({each})")
        print(f"the seed: {medians['seed'] - medians['none']:.1f} µs a turn")
    finally:
        await store.close()


def timed(spent: list[float], call: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def measured(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return await call(*args, **kwargs)
        finally:
            spent.append(time.thread_time() - started)

    return measured


async def search(directory: Path, n: int, others: int, facts: int, name: str) -> None:
    store = await SQLiteStore.open(directory / f"{name}.db")
    try:
        for i in range(others):
            await store.write(RememberFact(f"other{i % 50}", f"fact {i}: the weather in Paris"))
        for i in range(facts):
            await store.write(RememberFact(OWNER, f"fact {i}: Ann likes the weather in Paris"))
        spent: list[float] = []
        store.search_memories = timed(spent, store.search_memories)  # type: ignore[method-assign]
        rt = runtime(store, True)
        await turns(rt, 20)
        spent.clear()
        await turns(rt, n)
        print(f"{name}: the recall's search {sum(spent) / len(spent) * 1e6:6.1f} µs of CPU a turn")
    finally:
        await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--others", type=int, default=200, help="facts of other owners")
    parser.add_argument("--facts", type=int, default=20, help="facts of the turn's owner")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        await per_turn(directory, args.turns, args.rounds)
        await search(directory, args.turns, 0, 0, "no facts anywhere")
        await search(directory, args.turns, args.others, 0, f"no facts, {args.others} of others")
        await search(directory, args.turns, 0, args.facts, f"{args.facts} facts")
        await search(
            directory, args.turns, args.others, args.facts, f"{args.facts} facts and theirs"
        )


if __name__ == "__main__":
    asyncio.run(main())
