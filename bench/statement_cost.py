"""CPU per store call, by engine: what one write or one read costs the process itself.

A turn's server CPU on PostgreSQL is mostly its statements (docs/performance.md, "Round
six"); this measures the calls a turn makes, one at a time in one process, by the
process's CPU time (``time.process_time``: the event loop's passes, the driver, the
socket's system calls), not by the clock:

- ``append``: one bookkeeping row (an assistant's message), the store's grouped write;
- ``list_queued``: the steering queue's read, nothing queued;
- ``conversation_and_window``: a turn's start read (the row, its summary, its window);
- with ``--postgres``, ``statement``: the append's own statement sent with asyncpg
  alone, on a connection of its own (what the store's path adds is the difference).

Each is run ``--calls`` times, ``--rounds`` rounds; the median round is printed. The
event loop is uvloop's when it is installed, as under ``ostinato serve``.

Run: ``python bench/statement_cost.py [--postgres postgresql://user@host/db]`` (the
database is written to: use a scratch one).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock
from ostinato.store import open_store
from ostinato.store.base import Conversation, CreateConversation, Store, append, utcnow
from ostinato.store.sql.pg_driver import Drivers


async def cpu_per_call(call: Callable[[], Awaitable[Any]], calls: int, rounds: int) -> float:
    """µs of the process's CPU per call, the median of ``rounds`` rounds."""
    for _ in range(100):
        await call()
    found = []
    for _ in range(rounds):
        began = time.process_time()
        for _ in range(calls):
            await call()
        found.append((time.process_time() - began) / calls * 1e6)
    return statistics.median(found)


async def measure(url: str, calls: int, rounds: int) -> dict[str, float]:
    store: Store = await open_store(url)
    try:
        cid = new_id()
        now = utcnow()
        await store.write(CreateConversation(Conversation(cid, "idle", now, now, "bench")))
        reply = Message("assistant", (TextBlock("a reply of a few words"),))
        out = {
            "append": await cpu_per_call(lambda: append(store, cid, reply), calls, rounds),
            "list_queued": await cpu_per_call(lambda: store.list_queued(cid), calls, rounds),
            "conversation_and_window": await cpu_per_call(
                lambda: store.conversation_and_window(cid, limit=20), calls, rounds
            ),
        }
        if url.startswith("postgresql"):
            out["statement"] = await statement_alone(store, cid, reply, calls, rounds)
        return out
    finally:
        await store.close()


async def statement_alone(store: Any, cid: str, reply: Message, calls: int, rounds: int) -> float:
    """The append's statement, as the store sent it, sent again with asyncpg alone (a
    fresh id each time, on a connection outside the store's pool)."""
    import asyncpg

    from ostinato.fanout_pg import dsn_of

    sent: list[tuple[str, tuple[Any, ...]]] = []
    call = Drivers.call

    async def seen(self: Drivers, method: str, *args: Any, relaxed: bool = False) -> Any:
        sent.append((method, args))
        return await call(self, method, *args, relaxed=relaxed)

    Drivers.call = seen  # type: ignore[method-assign]
    try:
        await append(store, cid, reply)
    finally:
        Drivers.call = call  # type: ignore[method-assign]
    method, (sql, *values) = sent[-1]
    connection = await asyncpg.connect(dsn_of(store.engine.url))
    try:
        await connection.execute("SET synchronous_commit TO off")  # as the store's is

        async def again() -> Any:
            fresh = new_id()
            return await getattr(connection, method)(
                sql, *(fresh if v == values[0] else v for v in values)
            )

        return await cpu_per_call(again, calls, rounds)
    finally:
        await connection.close()


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--postgres", default="", help="a scratch database's URL")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        urls = [f"sqlite:///{tmp}/bench.db"]
        if args.postgres:
            urls.append(args.postgres)
        for url in urls:
            with asyncio.Runner(loop_factory=_loop_factory()) as runner:  # as serve runs
                found = runner.run(measure(url, args.calls, args.rounds))
            name = "postgresql" if url.startswith("postgresql") else "sqlite"
            print(name, ", ".join(f"{k} {v:.1f} µs" for k, v in found.items()), flush=True)


if __name__ == "__main__":
    main()
