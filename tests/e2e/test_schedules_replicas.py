"""Four ``ostinato serve`` processes on one PostgreSQL race for 1,000 reminders that come
due at one moment: each is delivered exactly once (one marked row per schedule, none
missing, none twice), and every schedule ends delivered."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from ostinato.ids import new_id
from ostinato.store.base import utcnow
from ostinato.store.sql.tables import messages, schedules
from tests.e2e.server import Server
from tests.e2e.test_fault_injection import scratch_postgres

ITEMS, SERVERS, CONVERSATIONS = 1_000, 4, 50
WAIT = 120.0
ENV = {"OSTINATO_BACKGROUND__POLL_SECONDS": "0.2"}


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[str, list[Server]]]:
    with scratch_postgres() as url:
        running = [
            Server(url, tmp_path / f"data{i}", tmp_path / f"serve{i}.log", ENV)
            for i in range(SERVERS)
        ]
        try:
            for server in running:
                server.start()
            yield url, running
        finally:
            for server in running:
                server.kill()


async def _due_soon(url: str, cids: list[str]) -> None:
    """1,000 reminders, all due two seconds from now, written in one statement."""
    at = utcnow() + timedelta(seconds=2)
    rows = [
        {
            "id": new_id(), "owner": "local", "conversation_id": cids[n % len(cids)],
            "mode": "reminder", "text": f"reminder {n}", "kind": "once", "spec": "",
            "zone": "UTC", "created_at": utcnow(), "next_fire": at, "state": "due",
            "holder": None, "lease_until": None, "fired": 0, "last_fired_at": None,
            "late_seconds": None, "wake_at": at,
        }
        for n in range(ITEMS)
    ]  # fmt: skip
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(sa.insert(schedules), rows)
    finally:
        await engine.dispose()


async def _outcome(url: str) -> tuple[int, list[str]]:
    """How many schedules are delivered, and the marker of every row they wrote."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            done = await conn.scalar(
                sa.select(sa.func.count()).where(schedules.c.state == "delivered")
            )
            found = await conn.execute(
                sa.select(messages.c.metadata).where(messages.c.metadata.like('%"schedule"%'))
            )
            marks = [json.loads(row[0])["schedule"] for row in found]
        return int(done or 0), marks
    finally:
        await engine.dispose()


def test_four_servers_deliver_a_thousand_due_items_once_each(
    servers: tuple[str, list[Server]],
) -> None:
    url, running = servers
    cids = [
        running[n % SERVERS].post("/v1/conversations").json()["id"] for n in range(CONVERSATIONS)
    ]
    asyncio.run(_due_soon(url, cids))
    deadline = time.monotonic() + WAIT
    while True:
        done, marks = asyncio.run(_outcome(url))
        if done == ITEMS or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert done == ITEMS
    assert len(marks) == ITEMS and len(set(marks)) == ITEMS  # no duplicate, no miss
    assert all(server.alive() for server in running)
