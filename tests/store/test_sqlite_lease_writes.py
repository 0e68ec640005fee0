"""SQLite's small transactions apart from ``write()`` (a lease, a hold, a spend
reservation): on the writer's connection on the event loop when it is free, on a thread
that waits for the lock when another connection holds it (``SQLiteWriter.alone_now``)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from ostinato.errors import StoreError
from ostinato.leases import Lease
from ostinato.store import SQLiteStore


async def test_a_hold_is_claimed_without_a_thread_when_the_lock_is_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await SQLiteStore.open(tmp_path / "s.db")
    try:
        lease = Lease(store)
        await lease.acquire()

        async def no_thread(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("sent to a thread")

        monkeypatch.setattr(asyncio, "to_thread", no_thread)
        assert await store.claim_conversation("c1", lease.id, "w1")
        assert await store.held_elsewhere("c1", "another server") is True
        await store.release_conversation("c1", "w1")
        assert not await store.held_elsewhere("c1", "another server")
    finally:
        monkeypatch.undo()
        await store.close()


async def test_a_hold_waits_on_a_thread_while_another_connection_writes(
    tmp_path: Path,
) -> None:
    store = await SQLiteStore.open(tmp_path / "s.db")
    other = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    try:
        lease = Lease(store)
        await lease.acquire()
        other.execute("BEGIN IMMEDIATE")  # another process's write, say
        claim = asyncio.create_task(store.claim_conversation("c1", lease.id, "w1"))
        await asyncio.sleep(0.2)
        assert not claim.done()  # waiting for the lock, on a thread: the loop runs on
        other.execute("COMMIT")
        assert await asyncio.wait_for(claim, 10)
        assert await store.held_elsewhere("c1", "another server")
    finally:
        other.close()
        await store.close()


async def test_a_refusal_inside_the_transaction_rolls_it_back(tmp_path: Path) -> None:
    store = await SQLiteStore.open(tmp_path / "s.db")
    try:
        lease = Lease(store)
        await lease.acquire()
        hold = sa.text(
            "INSERT INTO conversation_holds (conversation_id, holder, token) "
            "VALUES (:cid, :me, :token)"
        )

        def refused(tx: Any) -> None:
            tx.execute(hold, {"cid": "c1", "me": lease.id, "token": "w1"})
            raise ValueError("refused")

        with pytest.raises(ValueError, match="refused"):
            await store._lease_write(refused)
        assert not await store.held_elsewhere("c1", "another server")  # rolled back
        assert await store.claim_conversation("c1", lease.id, "w1")  # the writer goes on
        with pytest.raises(StoreError, match="sqlite"):
            await store._lease_write(lambda tx: tx.rows(sa.text("SELECT * FROM nowhere"), {}))
        await store.release_conversation("c1", "w1")
    finally:
        await store.close()
