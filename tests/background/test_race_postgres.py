"""Four servers on one PostgreSQL racing for 1,000 due reminders: each is delivered
exactly once (no duplicate, no miss). Each "server" is a runtime on an engine of its own
(its own connection pool), its poller ticking concurrently with the others'."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from ostinato.background.firer import MARKER, Firer
from ostinato.background.schedules import Schedules
from ostinato.config.background import BackgroundSection
from ostinato.ids import new_id
from ostinato.models.scripted import ScriptedModel
from ostinato.runtime import Runtime
from ostinato.store.schedules import Schedule
from ostinato.store.sql.postgres import PostgresStore
from tests.store.conftest import open_postgres, postgres_url

__all__ = ["postgres_url"]

ITEMS, SERVERS, CONVERSATIONS = 1_000, 4, 100
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


async def test_four_servers_deliver_a_thousand_due_items_once_each(postgres_url: sa.URL) -> None:
    first = await open_postgres(postgres_url)
    stores = [first, *[await PostgresStore.open(postgres_url) for _ in range(SERVERS - 1)]]
    runtimes = [Runtime(store, model=ScriptedModel()) for store in stores]
    try:
        cids = [
            (await runtimes[0].create_conversation(owner="ann")).id for _ in range(CONVERSATIONS)
        ]
        for n in range(ITEMS):
            item = Schedule(
                new_id(),
                f"o{n}",
                cids[n % CONVERSATIONS],
                "reminder",
                f"r{n}",
                "once",
                "",
                "UTC",
                T0,
                T0 - timedelta(seconds=n % 60),
            )
            await first.add_schedule(item, limit=10)
        settings = BackgroundSection()
        firers = [
            Firer(rt, Schedules(rt.store, settings, lambda: T0), f"server{i}", batch=25)
            for i, rt in enumerate(runtimes)
        ]

        async def drain(firer: Firer) -> int:
            taken = 0
            while found := await firer.tick():
                taken += len(found)
            return taken

        counts = await asyncio.gather(*(drain(f) for f in firers))
        assert sum(counts) == ITEMS
        assert all(count > 0 for count in counts), counts  # they really raced
        marks: list[str] = []
        for cid in cids:
            rows = await first.list_messages(cid, include_hidden=True)
            marks += [str(r.metadata[MARKER]) for r in rows if MARKER in r.metadata]
        assert len(marks) == ITEMS and len(set(marks)) == ITEMS
    finally:
        for runtime in runtimes:
            await runtime.close()
