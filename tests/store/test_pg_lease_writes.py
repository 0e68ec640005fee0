"""PostgreSQL's small transactions apart from ``write()`` (a lease, a hold, a spend
settled, a version pinned, a schedule claimed) straight on asyncpg (``store.sql.pg_tx``):
the same transactions as through SQLAlchemy, a transaction of one statement sent alone
(``_lease_one``), one statement for several rows sent together (``_lease_many``), a
hold claimed in one statement, a refusal rolled back."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import asyncpg as pg_asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from ostinato.errors import StoreError
from ostinato.ids import new_id
from ostinato.leases import Lease
from ostinato.store import PostgresStore
from ostinato.store.base import utcnow
from ostinato.store.spend import Charge
from ostinato.store.sql.pg_reads import compile_raw
from ostinato.store.sql.pg_tx import rowcount
from ostinato.store.sql.statements import write_statements
from ostinato.store.sql.tables import conversation_holds, servers

HOLD = sa.text(
    "INSERT INTO conversation_holds (conversation_id, holder, token) VALUES (:cid, :me, :token)"
)
HOLDERS = sa.select(conversation_holds.c.holder).where(
    conversation_holds.c.conversation_id == sa.bindparam("cid")
)


async def holders(store: PostgresStore, cid: str) -> list[str]:
    return [row[0] for row in await store._fetch(HOLDERS, {"cid": cid})]


def given_back(store: PostgresStore) -> bool:
    """Every connection is back in the pool, or kept idle by the store."""
    return bool(store.engine.sync_engine.pool.checkedout() == store._drivers.kept)


def no_sqlalchemy_transactions(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(self: AsyncEngine) -> Any:
        raise AssertionError("a transaction through SQLAlchemy")

    monkeypatch.setattr(AsyncEngine, "begin", refused)


async def test_lease_transactions_run_straight_on_asyncpg(
    postgres_store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = postgres_store
    lease = Lease(store)
    await lease.acquire()
    no_sqlalchemy_transactions(monkeypatch)
    assert await store.claim_conversation("c1", lease.id, "w1")
    assert await store.held_elsewhere("c1", "another server")
    await store.release_conversation("c1", "w1")
    assert await store.renew_lease(lease.id, 30.0)
    version = await store.record_agent_version("helper", "h1", {"a": 1}, utcnow())
    assert version.number == 1
    await store.pin_versions("c1", {"helper": 1, "other": None})
    assert await store.conversation_versions("c1") == {"helper": 1, "other": None}
    charge = Charge("ann", "2026-12-05", "m", "helper", (("owner", "ann"),), 0.25, 3, 4)
    sent = store.stats.writes
    await store.settle_spend(None, charge)  # no hold to read: a planned, grouped write
    assert store.stats.writes == sent + 1
    (usage,) = await store.usage_rows("ann", "2026-12-05", "2026-12-05")
    assert (usage.calls, usage.tokens_in, usage.cost_usd) == (1, 3, 0.25)


async def test_a_transaction_of_one_statement_is_that_statement_alone(
    postgres_store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = postgres_store
    lease = Lease(store)
    await lease.acquire()
    sent: list[str] = []
    execute = store._execute_raw

    async def spy(text: str, args: list[Any]) -> str:
        sent.append(text)
        return await execute(text, args)

    async def no_transaction(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a transaction block")

    monkeypatch.setattr(store, "_execute_raw", spy)
    monkeypatch.setattr(store, "_transaction", no_transaction)
    assert await store.claim_conversation("c1", lease.id, "w1")  # the whole claim: one
    assert not await store.claim_conversation("c1", "another server", "w2")
    await store.release_conversation("c1", "w1")
    assert await store.renew_lease(lease.id, 30.0)
    assert len(sent) == 4
    assert await holders(store, "c1") == []


async def test_of_servers_claiming_at_once_exactly_one_wins(
    postgres_store: PostgresStore,
) -> None:
    store = postgres_store
    leases = [Lease(store) for _ in range(4)]
    for lease in leases:
        await lease.acquire()
    gone = Lease(store)
    for round in range(12):
        cid = f"c{round}"
        if round % 2:  # a dead server's hold to take, rather than none
            await gone.acquire()
            params = {"cid": cid, "me": gone.id, "token": "g"}
            await store._lease_write(lambda tx, p=params: tx.execute(HOLD, p))
            await store.release_lease(gone.id)
        won = await asyncio.gather(
            *(store.claim_conversation(cid, lease.id, f"w{round}") for lease in leases)
        )
        (holder,) = await holders(store, cid)
        assert won == [lease.id == holder for lease in leases]  # one, and it holds


async def test_a_refusal_inside_the_transaction_rolls_it_back(
    postgres_store: PostgresStore,
) -> None:
    store = postgres_store
    lease = Lease(store)
    await lease.acquire()

    def refused(tx: Any) -> None:
        tx.execute(HOLD, {"cid": "c1", "me": lease.id, "token": "w1"})
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        await store._lease_write(refused)
    assert await holders(store, "c1") == []  # rolled back
    with pytest.raises(StoreError, match="postgresql"):
        await store._lease_write(lambda tx: tx.rows(sa.text("SELECT * FROM nowhere"), {}))

    def went_on(tx: Any) -> None:  # a refused statement's error caught: still rolled back
        tx.execute(HOLD, {"cid": "c1", "me": lease.id, "token": "w1"})
        with pytest.raises(Exception, match="nowhere"):
            tx.rows(sa.text("SELECT * FROM nowhere"), {})

    with pytest.raises(StoreError, match="nowhere"):
        await store._lease_write(went_on)
    assert await holders(store, "c1") == []
    assert given_back(store)
    assert await store.claim_conversation("c1", lease.id, "w1")  # the connections go on
    assert await holders(store, "c1") == [lease.id]


async def test_a_cancelled_transaction_commits_nothing_and_its_connection_is_dropped(
    postgres_store: PostgresStore,
) -> None:
    store = postgres_store
    lease = Lease(store)
    await lease.acquire()

    def slow(tx: Any) -> None:
        tx.execute(HOLD, {"cid": "c1", "me": lease.id, "token": "w1"})
        tx.rows(sa.text("SELECT pg_sleep(10)"), {})

    task = asyncio.ensure_future(store._lease_write(slow))
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await holders(store, "c1") == []
    assert given_back(store)
    assert await store.claim_conversation("c1", lease.id, "w2")


async def test_several_rows_of_one_statement_are_all_or_none(
    postgres_store: PostgresStore,
) -> None:
    store = postgres_store
    stmt = sa.insert(conversation_holds).values(
        conversation_id=sa.bindparam("cid"), holder=sa.bindparam("me"), token="t"
    )
    await store._lease_many(stmt, [{"cid": "c1", "me": "a"}, {"cid": "c2", "me": "b"}])
    assert await holders(store, "c1") == ["a"] and await holders(store, "c2") == ["b"]
    with pytest.raises(StoreError, match="postgresql"):  # the second row breaks a rule
        await store._lease_many(stmt, [{"cid": "c3", "me": "a"}, {"cid": "c4", "me": None}])
    assert await holders(store, "c3") == []
    await store._lease_many(stmt, [])


async def test_a_statement_that_cannot_be_sent_as_text_goes_through_sqlalchemy(
    postgres_store: PostgresStore,
) -> None:
    store = postgres_store
    lease = Lease(store)
    await lease.acquire()
    among = sa.select(servers.c.id).where(servers.c.id.in_(sa.bindparam("ids", expanding=True)))
    assert compile_raw(among, pg_asyncpg.dialect()) is None

    def work(tx: Any) -> list[str]:
        tx.execute(HOLD, {"cid": "c1", "me": lease.id, "token": "w1"})
        return [row[0] for row in tx.rows(among, {"ids": [lease.id, new_id()]})]

    assert await store._lease_write(work) == [lease.id]
    assert await holders(store, "c1") == [lease.id]  # once: the first try rolled back


def test_a_command_tag_gives_the_rows_changed() -> None:
    assert [rowcount(tag) for tag in ("UPDATE 2", "INSERT 0 1", "DELETE 0", "SELECT 3")] == [
        2,
        1,
        0,
        3,
    ]
    assert rowcount("BEGIN") == -1


def test_a_bind_type_that_converts_its_value_is_converted_as_sqlalchemy_would() -> None:
    raw = compile_raw(write_statements("postgresql")["insert_message"], pg_asyncpg.dialect())
    assert raw is not None
    params = dict.fromkeys(raw.names, "x") | {"hidden": 1}
    assert raw.args(params)[raw.names.index("hidden")] is True  # asyncpg takes a bool only
