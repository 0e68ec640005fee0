"""The PostgreSQL store keeps a few asyncpg connections between uses
(``store.sql.pg_driver.Drivers``): statements one after another take no connection from
the pool; a connection is kept only in the state the pool hands one out in; a small
pool keeps one for SQLAlchemy's own statements; closing gives every one back. A turn's
bookkeeping commits on a connection that does not wait for the WAL's flush, which never
goes back to the pool so."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock, user_text
from ostinato.store import PostgresStore
from ostinato.store.base import Conversation, CreateConversation, append, utcnow
from ostinato.store.sql.pg_driver import KEEP, Drivers

ONE = "SELECT $1::int"


def checkouts(monkeypatch: pytest.MonkeyPatch) -> list[None]:
    """One entry per connection taken from a pool from now on."""
    taken: list[None] = []
    raw_connection = AsyncEngine.raw_connection

    async def counted(engine: AsyncEngine) -> Any:
        taken.append(None)
        return await raw_connection(engine)

    monkeypatch.setattr(AsyncEngine, "raw_connection", counted)
    return taken


async def test_statements_one_after_another_take_no_connection_from_the_pool(
    postgres_store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = postgres_store
    await store._fetch_raw(ONE, [1])  # a connection kept now, if none was
    taken = checkouts(monkeypatch)
    for n in range(20):
        assert [tuple(r) for r in await store._fetch_raw(ONE, [n])] == [(n,)]
    assert taken == []
    together = await asyncio.gather(*(store._fetch_raw(ONE, [n]) for n in range(KEEP + 3)))
    assert [r[0][0] for r in together] == list(range(KEEP + 3))  # more at once: the pool's
    assert len(taken) >= 3


async def test_a_connection_is_kept_only_as_the_pool_would_hand_it_out(
    postgres_store: PostgresStore,
) -> None:
    engine = postgres_store.engine
    drivers = Drivers(engine)
    async with drivers.use() as driver:
        await driver.execute("BEGIN")
    async with drivers.use() as after:
        assert after is not driver and not after.is_in_transaction()
    with pytest.raises(Exception, match="division by zero"):  # PostgreSQL's answer: kept
        async with drivers.use() as answered:
            await answered.fetch("SELECT 1 / $1::int", 0)
    async with drivers.use() as again:
        assert again is answered
    with pytest.raises(asyncio.CancelledError):  # anything else: never used again
        async with drivers.use() as cancelled:
            raise asyncio.CancelledError
    async with drivers.use() as fresh:
        assert fresh is not cancelled
    await drivers.close()
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]


async def test_a_call_keeps_its_connection_only_as_the_pool_would_hand_it_out(
    postgres_store: PostgresStore,
) -> None:
    engine = postgres_store.engine
    drivers = Drivers(engine)
    pid = "SELECT pg_backend_pid()"
    first = await drivers.call("fetchval", pid)
    assert await drivers.call("fetchval", pid) == first  # kept, and used again
    await drivers.call("execute", "BEGIN")  # that one again, left in a transaction block
    assert await drivers.call("fetchval", pid) != first  # so it was not kept
    with pytest.raises(Exception, match="division by zero"):  # PostgreSQL's answer: kept
        await drivers.call("fetch", "SELECT 1 / $1::int", 0)
    answered = await drivers.call("fetchval", pid)
    assert await drivers.call("fetchval", pid) == answered
    assert await drivers.call("fetchval", "SHOW synchronous_commit", relaxed=True) == "off"
    await drivers.close()
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]


async def test_a_pool_of_one_keeps_none(postgres_url: sa.URL) -> None:
    sized = {"pool_size": "1", "max_overflow": "0", "pool_timeout": "2"}
    store = await PostgresStore.open(postgres_url.update_query_dict(sized))
    try:
        await store._fetch_raw(ONE, [1])
        async with store.engine.connect() as connection:  # SQLAlchemy's own way: free
            assert (await connection.execute(sa.text("SELECT 2"))).scalar() == 2
    finally:
        await store.close()


async def test_closing_the_store_gives_every_connection_back(postgres_url: sa.URL) -> None:
    store = await PostgresStore.open(postgres_url)
    await asyncio.gather(*(store._fetch_raw(ONE, [n]) for n in range(KEEP + 2)))
    pool = store.engine.pool
    assert pool.checkedout() == KEEP  # type: ignore[attr-defined]
    await store.close()
    assert pool.checkedout() == 0  # type: ignore[attr-defined]


async def setting(driver: Any) -> str:
    found: str = await driver.fetchval("SHOW synchronous_commit")
    return found


async def test_a_turns_bookkeeping_commits_without_waiting_for_the_flush(
    postgres_store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, now = postgres_store, utcnow()
    used: list[tuple[bool, str]] = []
    use, call = Drivers.use, Drivers.call

    @contextlib.asynccontextmanager
    async def seen(self: Drivers, *, relaxed: bool = False) -> AsyncIterator[Any]:
        async with use(self, relaxed=relaxed) as driver:
            used.append((relaxed, await setting(driver)))
            yield driver

    async def called(self: Drivers, method: str, *args: Any, relaxed: bool = False) -> Any:
        found = await call(self, method, *args, relaxed=relaxed)
        show = await call(self, "fetchval", "SHOW synchronous_commit", relaxed=relaxed)
        used.append((relaxed, show))  # the kept connection the statement just used
        return found

    monkeypatch.setattr(Drivers, "use", seen)
    monkeypatch.setattr(Drivers, "call", called)
    made = Conversation(new_id(), "idle", now, now, "ann")
    await store.write(CreateConversation(made))  # acknowledges a client's request
    await append(store, made.id, user_text("hello"))  # the person's words: the same
    await append(store, made.id, Message("assistant", (TextBlock("hi"),)))  # bookkeeping
    assert used == [(False, "on"), (False, "on"), (True, "off")]


async def test_no_relaxed_connection_goes_back_to_the_pool_relaxed(
    postgres_store: PostgresStore,
) -> None:
    engine = postgres_store.engine
    drivers = Drivers(engine)

    async def relaxed_use() -> str:
        async with drivers.use(relaxed=True) as driver:
            await asyncio.sleep(0.05)  # all at once: more than are kept
            return await setting(driver)

    assert await asyncio.gather(*(relaxed_use() for _ in range(5))) == ["off"] * 5
    async with drivers.use() as ordinary:
        assert await setting(ordinary) == "on"
    connections = [await engine.raw_connection() for _ in range(8)]
    try:
        assert {await setting(c.driver_connection) for c in connections} == {"on"}
    finally:
        for each in connections:
            each.close()
    await drivers.close()
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]


async def test_a_small_pool_keeps_no_relaxed_connection(postgres_url: sa.URL) -> None:
    sized = {"pool_size": "2", "max_overflow": "0"}
    store = await PostgresStore.open(postgres_url.update_query_dict(sized))
    try:
        async with store._drivers.use(relaxed=True) as driver:
            assert await setting(driver) == "on"
    finally:
        await store.close()
