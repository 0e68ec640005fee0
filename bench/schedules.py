"""Finding due schedules with 100,000 stored, and how late a due reminder fires.

1. The poller's query: 100,000 schedules are stored (spread over the next 30 days, so
   almost none are due), then ``claim_schedules`` runs 200 times with nothing due (the
   common tick) and 200 times with 10 due; the figure is its median time, a claim's
   whole transaction. Target: under 5 ms on SQLite and PostgreSQL.
2. Fire latency: a ``Firer`` runs at the default poll (0.5 s) while 20 prompts come
   due one after another, each set at a random phase of the poll; the figure is the
   time from each one's ``next_fire`` to its stage one (the background turn) having
   begun: its row committed and its turn started. Target: under 1 s. The same for 20
   reminders, to their row committed and published (no stage one).

Run:  python bench/schedules.py [--store sqlite|URL] [--count N]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from ostinato.background.firer import Firer
from ostinato.background.schedules import Schedules
from ostinato.frames import MessageCommitted
from ostinato.ids import new_id
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.store import open_store
from ostinato.store.base import Store, utcnow
from ostinato.store.schedules import Schedule, ScheduleStore
from ostinato.store.sql.rows import sqlite_time
from ostinato.store.sql.tables import schedules as table

LEASE = timedelta(seconds=60)


def rows(count: int, cid: str) -> list[dict[str, Any]]:
    now = utcnow()
    out = []
    for n in range(count):
        at = now + timedelta(days=1 + (n % 30), seconds=n)
        out.append(
            dict(
                id=new_id(),
                owner=f"o{n % 5000}",
                conversation_id=cid,
                mode="reminder",
                text=f"r{n}",
                kind="once",
                spec="",
                zone="UTC",
                created_at=now,
                next_fire=at,
                state="due",
                holder=None,
                lease_until=None,
                fired=0,
                last_fired_at=None,
                late_seconds=None,
                wake_at=at,
            )
        )
    return out


async def fill(store: Store, count: int, cid: str) -> None:
    """Write ``count`` schedules in bulk (straight to the table, not one add at a time)."""
    made = rows(count, cid)
    path = getattr(store, "path", None)
    if path is not None:  # SQLite
        for row in made:
            for key, value in row.items():
                if hasattr(value, "tzinfo"):
                    row[key] = sqlite_time(value)
        with sqlite3.connect(path) as conn:
            names = ", ".join(made[0])
            marks = ", ".join(f":{k}" for k in made[0])
            conn.executemany(f"INSERT INTO schedules ({names}) VALUES ({marks})", made)
        return
    engine = store.engine
    async with engine.begin() as conn:
        for start in range(0, count, 10_000):
            await conn.execute(sa.insert(table), made[start : start + 10_000])


async def claim_cost(store: ScheduleStore, due: int, runs: int = 200) -> float:
    samples = []
    for _ in range(runs):
        for _ in range(due):
            now = utcnow()
            item = Schedule(new_id(), "bench", "c", "reminder", "x", "once", "", "UTC", now, now)
            await store.add_schedule(item, limit=10**9)
        begun = time.perf_counter()
        taken = await store.claim_schedules("bench", utcnow(), LEASE, 20)
        samples.append(time.perf_counter() - begun)
        assert len(taken) == due, (len(taken), due)
        for item in taken:
            await store.delete_schedule(item.owner, item.id)
    return statistics.median(samples) * 1000


async def fire_latency(runtime: Runtime, cid: str, mode: str, count: int = 20) -> list[float]:
    """How late each of ``count`` schedules of ``mode`` fires: for a prompt, until its
    stage one has begun; for a reminder, until its row is published."""
    schedules = Schedules(runtime.store)
    begun: dict[str, float] = {}
    arrived = asyncio.Event()

    def started(schedule: Schedule, handle: object) -> None:
        assert schedule.next_fire is not None
        begun[schedule.id] = (utcnow() - schedule.next_fire).total_seconds()
        arrived.set()

    firer = Firer(runtime, schedules, started=started)
    running = asyncio.create_task(firer.run())
    watching = runtime.bus.subscribe(cid)
    late = []
    try:
        for n in range(count):
            # at a random phase of the poll (right after a tick, due times would line up
            # with the next ones and the figure would be the tick's own cost)
            await asyncio.sleep(random.uniform(0, 0.5))
            text = f"{mode} {n}"
            made = await schedules.create("bench", cid, "in 1s", text, mode=mode)  # type: ignore[arg-type]
            if mode == "prompt":
                while made.id not in begun:
                    arrived.clear()
                    await arrived.wait()
                late.append(begun[made.id])
                continue
            async for frame in watching:
                if isinstance(frame, MessageCommitted) and frame.message.text == text:
                    assert made.next_fire is not None
                    late.append((utcnow() - made.next_fire).total_seconds())
                    break
    finally:
        watching.close()
        firer.stop()
        await running
    return late


async def main(store_url: str | None, count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = store_url or f"sqlite:///{Path(tmp) / 'bench.db'}"
        store = await open_store(url)
        assert isinstance(store, ScheduleStore)
        steps = [text_step("done") for _ in range(200)]  # each prompt's two stages
        runtime = Runtime(store, model=ScriptedModel(steps))
        cid = (await runtime.create_conversation(owner="bench")).id
        begun = time.perf_counter()
        await fill(store, count, cid)
        print(
            f"store: {url.split('@')[-1]}; {count:,} schedules written in "
            f"{time.perf_counter() - begun:.1f} s"
        )
        print(f"claim, nothing due: median {await claim_cost(store, 0):.2f} ms")
        print(f"claim, 10 due:      median {await claim_cost(store, 10, 50):.2f} ms")
        for mode, what in (("prompt", "stage one begun"), ("reminder", "row published")):
            late = await fire_latency(runtime, cid, mode)
            print(
                f"fire latency, {mode} (due -> {what}), poll 0.5 s: median "
                f"{statistics.median(late) * 1000:.0f} ms, max {max(late) * 1000:.0f} ms"
            )
        if store_url:  # a shared database: leave it as it was
            engine = getattr(store, "engine", None)
            if engine is not None:
                async with engine.begin() as conn:
                    await conn.execute(sa.delete(table).where(table.c.conversation_id == cid))
                    await conn.execute(sa.delete(table).where(table.c.owner == "bench"))
        await runtime.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=None, help="a store URL (default: a SQLite file)")
    parser.add_argument("--count", type=int, default=100_000)
    args = parser.parse_args()
    asyncio.run(main(args.store, args.count))
