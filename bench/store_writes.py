"""Store write costs: one write at a time, and many writers at once.

Prints, for each store URL:

- µs per ``write()`` with nobody else writing (1 op: an append; 2 ops: an append and a
  tool call start, as the turn loop writes after a model reply), median of many;
- µs per ``list_messages`` of a 20-message history;
- writes/s with 1,000 concurrent writers (1,000 conversations x 3 appends each), and
  how many transactions the SQLite writer used for them (group commit).

SQLite runs ``--pairs`` times each way, interleaved: ``sqlite`` (the default durability:
a person's message, the 1-op write here, waits for the WAL's fsync; the 2-op write, a
reply and a tool call's record, does not) and ``sqlite-rel`` (``durability=relaxed``).

Run:  python bench/store_writes.py [--postgres postgresql://user@host/db] [--dir DIR]
The PostgreSQL database given is written to (rows in fresh conversations); use a
scratch one.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock, ToolUseBlock, user_text
from ostinato.store import SQLiteStore, Store, open_store
from ostinato.store.base import (
    AppendMessage,
    Conversation,
    CreateConversation,
    StartToolCall,
    StartTurn,
    ToolCallRecord,
    Turn,
    utcnow,
)


async def conversation(store: Store) -> tuple[str, str]:
    now = utcnow()
    cid, tid = new_id(), new_id()
    await store.write(
        CreateConversation(Conversation(cid, "running", now, now)),
        StartTurn(Turn(tid, cid, new_id(), "running", now)),
    )
    return cid, tid


def reply(i: int) -> Message:
    call = ToolUseBlock(f"call_{i}", "search", {"q": "weather in Lisbon", "n": i})
    return Message("assistant", (TextBlock("Let me look that up."), call))


async def uncontended(store: Store, n: int) -> tuple[float, float, float]:
    cid, tid = await conversation(store)
    one, two, reads = [], [], []
    for i in range(n):
        started = time.perf_counter()
        await store.write(AppendMessage(cid, user_text(f"question {i}"), tid))
        one.append(time.perf_counter() - started)
        record = ToolCallRecord(f"call_{i}", cid, tid, "search", {"q": "x"}, "running", utcnow())
        started = time.perf_counter()
        await store.write(AppendMessage(cid, reply(i), tid), StartToolCall(record))
        two.append(time.perf_counter() - started)
    fresh, _ = await conversation(store)
    for i in range(20):
        await store.write(AppendMessage(fresh, reply(i) if i % 2 else user_text("q")))
    for _ in range(n):
        started = time.perf_counter()
        await store.list_messages(fresh)
        reads.append(time.perf_counter() - started)
    return tuple(statistics.median(xs) * 1e6 for xs in (one, two, reads))  # type: ignore[return-value]


async def concurrent(store: Store, writers: int, each: int) -> tuple[float, str]:
    """Writes/s of ``writers`` concurrent writers, and (SQLite) the transactions used."""
    cids = [(await conversation(store))[0] for _ in range(writers)]

    async def writer(cid: str) -> None:
        for i in range(each):
            await store.write(AppendMessage(cid, user_text(f"message {i}")))

    before = store.stats.transactions if isinstance(store, SQLiteStore) else 0
    started = time.perf_counter()
    await asyncio.gather(*(writer(cid) for cid in cids))
    rate = writers * each / (time.perf_counter() - started)
    used = ""
    if isinstance(store, SQLiteStore):
        used = f" ({store.stats.transactions - before} transactions for {writers * each:,} writes)"
        sync = store._writer._sync
        used += f", {sync.fsyncs} fsyncs in all" if sync is not None else ""
    return rate, used


async def run(label: str, url: str, n: int) -> None:
    store = await open_store(url)
    try:
        await uncontended(store, 200)  # warm-up
        one, two, read = await uncontended(store, n)
        rate, used = await concurrent(store, 1000, 3)
        print(f"{label:<10}{one:>10.1f}{two:>10.1f}{read:>12.1f}{rate:>14,.0f}{used}")
    finally:
        await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--postgres", help="a scratch PostgreSQL database URL")
    parser.add_argument("--dir", help="where the SQLite file goes (default: a temp dir)")
    parser.add_argument("-n", type=int, default=2000, help="uncontended writes to time")
    parser.add_argument("--pairs", type=int, default=2, help="SQLite runs of each durability")
    args = parser.parse_args()
    directory = Path(args.dir or tempfile.mkdtemp(prefix="ostinato-bench-"))
    print(f"{'store':<10}{'1 op µs':>10}{'2 ops µs':>10}{'read 20 µs':>12}{'writes/s':>14}")
    await run("memory", "memory://", args.n)
    for k in range(args.pairs):  # durable and relaxed, interleaved (wal_sync)
        await run("sqlite", f"sqlite:///{directory}/bench{k}.db", args.n)
        await run("sqlite-rel", f"sqlite:///{directory}/relaxed{k}.db?durability=relaxed", args.n)
    if args.postgres:
        await run("postgres", args.postgres, min(args.n, 500))


if __name__ == "__main__":
    asyncio.run(main())
