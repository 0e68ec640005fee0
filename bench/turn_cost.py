"""The library's cost of one plain turn, in process: a new conversation and one turn in it
that the model answers with a line of text (what ``bench/serve_load.py``'s sequential
run asks of the server, without HTTP, SSE or a model server).

Prints the CPU per turn (``time.process_time``, every thread of the process) after 20
turns of warm-up; with ``--trace`` (SQLite) also what the store ran a turn: each kind of
statement on the writer's connection (``W``) and on the readers' (``R``), transactions
included (``BEGIN IMMEDIATE``). Runs on any tree since f923f6e (``PYTHONPATH=<tree>/src``),
so under callgrind two trees' instructions a turn can be compared: run it with two
``--turns`` and divide the difference.

Run:  python bench/turn_cost.py [--store memory|sqlite] [--turns 1000] [--trace]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import sqlite3
import tempfile
import time

from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.store import open_store

WARM_UP = 20


def traced(store: object, counts: collections.Counter[str]) -> None:
    """Count each statement the SQLite store's connections run from now on."""
    writer: sqlite3.Connection = store._writer._conn  # type: ignore[attr-defined]
    for conn in [writer, *store._readers]:  # type: ignore[attr-defined]
        side = "W" if conn is writer else "R"
        conn.set_trace_callback(lambda s, side=side: counts.update([f"{side} {_short(s)}"]))


def _short(statement: str) -> str:
    return " ".join(statement.split())[:60]


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--store", choices=("memory", "sqlite"), default="sqlite")
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--trace", action="store_true", help="count the statements (SQLite)")
    args = parser.parse_args()
    url = "memory://" if args.store == "memory" else f"sqlite:///{tempfile.mkdtemp()}/t.db"
    store = await open_store(url)
    runtime = Runtime(store, model=ScriptedModel())

    async def turn() -> None:
        conversation = await runtime.create_conversation()
        model = ScriptedModel([text_step("Hello there.")])
        result = await runtime.run_turn(conversation.id, "hello", model=model)
        assert result.stop_reason == "end_turn", result

    for _ in range(WARM_UP):
        await turn()
    counts: collections.Counter[str] = collections.Counter()
    if args.trace and args.store == "sqlite":
        traced(store, counts)
    began = time.process_time()
    for _ in range(args.turns):
        await turn()
    each = (time.process_time() - began) / args.turns
    print(f"{args.store}: {each * 1000:.3f} ms of CPU a turn ({args.turns} turns)", flush=True)
    for statement, n in counts.most_common():
        print(f"{n / args.turns:6.2f} a turn  {statement}")
    os._exit(0)  # out at once: an older tree's close can wait out timers


if __name__ == "__main__":
    asyncio.run(main())
