"""Retention on every engine: the daily run deletes the conversations idle longer than the
setting (not a running one, not a recent one), exactly once a day however many servers
race for it, again the next day; a server that died holding the day's claim leaves it to
another once its lease ends; a server whose lease ran out commits nothing."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ostinato.background.retention import Retention
from ostinato.ids import new_id
from ostinato.store import Store
from ostinato.store.base import Conversation, CreateConversation
from ostinato.store.jobs import ClaimJob

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


async def made(store: Store, days_idle: int, state: str = "idle") -> str:
    at = NOW - timedelta(days=days_idle)
    cid = new_id()
    await store.write(CreateConversation(Conversation(cid, state, at, at, "ann")))  # type: ignore[arg-type]
    return cid


def server(store: Store, tmp_path: Path, clock: list[datetime]) -> Retention:
    return Retention(store, 30, tmp_path, clock=lambda: clock[0])


async def test_once_a_day_across_servers(store: Store, tmp_path: Path) -> None:
    old, running, recent = (
        await made(store, 40),
        await made(store, 40, "running"),
        await made(store, 3),
    )
    (tmp_path / "workdirs" / old).mkdir(parents=True)
    clock = [NOW]
    servers = [server(store, tmp_path, clock) for _ in range(4)]
    results = await asyncio.gather(*(s.tick() for s in servers))
    assert [r for r in results if r is not None] == [[old]]
    assert await store.get_conversation(old) is None
    assert not (tmp_path / "workdirs" / old).exists()
    assert {c.id for c in await store.list_conversations()} == {running, recent}
    another = await made(store, 45)
    clock[0] = NOW + timedelta(hours=11)  # the same day: done
    assert [await s.tick() for s in servers] == [None] * 4
    clock[0] = NOW + timedelta(days=1)  # the next day: due again
    results = await asyncio.gather(*(s.tick() for s in servers))
    assert [r for r in results if r is not None] == [[another]]


async def test_a_dead_servers_claim_passes_on(store: Store, tmp_path: Path) -> None:
    old = await made(store, 40)
    clock = [NOW]
    dead, alive = server(store, tmp_path, clock), server(store, tmp_path, clock)
    day = NOW.replace(hour=0)
    await store.write(ClaimJob("", "retention", dead.holder, NOW, NOW + dead.lease, day))
    assert await alive.tick() is None  # held by a live lease
    clock[0] = NOW + dead.lease + timedelta(seconds=1)
    assert await alive.tick() == [old]
    clock[0] = NOW + dead.lease * 3  # the dead one wakes: its claim is gone, the day done
    assert await dead.tick() is None
