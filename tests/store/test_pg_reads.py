"""PostgreSQL reads straight on asyncpg (``store.sql.pg_reads``): a statement the store
reads again runs from its second use as text compiled once, with the rows SQLAlchemy
would give; one built for a single call, or one whose text alone would not run it,
goes SQLAlchemy's way."""

from __future__ import annotations

import gc
from decimal import Decimal

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import asyncpg as pg_asyncpg

from ostinato.errors import StoreError
from ostinato.messages import user_text
from ostinato.store import PostgresStore
from ostinato.store.base import append
from ostinato.store.sql.pg_driver import driver_of
from ostinato.store.sql.pg_reads import RawSQL, RawStatements, compile_raw
from ostinato.store.sql.spend_tables import spend_days
from ostinato.store.sql.tables import conversations, messages
from tests.store.conftest import raw_statements
from tests.store.test_store_ops import new_conversation

DIALECT = pg_asyncpg.dialect()
BY_ID = sa.select(conversations).where(conversations.c.id == sa.bindparam("cid"))


def test_a_statement_is_compiled_at_its_second_use_and_dropped_with_it() -> None:
    raw = RawStatements(DIALECT)
    stmt = sa.select(messages.c.seq).where(messages.c.conversation_id == sa.bindparam("c"))
    assert raw.get(stmt) is None  # first use: SQLAlchemy's way
    second = raw.get(stmt)
    assert isinstance(second, RawSQL) and raw.get(stmt) is second
    assert second.names == ("c",) and "$1" in second.text
    del stmt, second
    gc.collect()
    assert raw._entries == {}  # a new statement given its id starts afresh


def test_what_text_alone_would_not_run_is_never_compiled() -> None:
    expanding = sa.select(messages.c.seq).where(messages.c.id.in_(sa.bindparam("ids")))
    assert compile_raw(expanding, DIALECT) is None
    numeric = sa.select(sa.cast(spend_days.c.spent_usd, sa.Numeric(10, 2)))
    assert compile_raw(numeric, DIALECT) is None  # SQLAlchemy converts it on the way out
    limited = compile_raw(sa.select(conversations.c.id).limit(3), DIALECT)
    assert limited is not None and limited.args({}) == [3]  # bound when it was built
    floats = compile_raw(sa.select(spend_days.c.day, spend_days.c.spent_usd), DIALECT)
    assert floats is not None and floats.floats == (1,)
    assert floats.rows([("d", Decimal("1.5"))]) == [("d", 1.5)]


async def test_reads_give_the_rows_sqlalchemy_gives(
    postgres_store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = postgres_store
    conv = await new_conversation(store)
    await append(store, conv.id, user_text("hello"))
    async with store.engine.connect() as connection:
        expected = (await connection.execute(BY_ID, {"cid": conv.id})).all()
    sent = raw_statements(store, monkeypatch)
    first = await store._fetch(BY_ID, {"cid": conv.id})
    second = await store._fetch(BY_ID, {"cid": conv.id})
    assert len(sent) == 1  # the first use went SQLAlchemy's way, the second straight
    assert [tuple(r) for r in first] == [tuple(r) for r in second] == [tuple(expected[0])]
    for _ in range(2):  # a fresh statement each call: never compiled
        await store._fetch(sa.select(conversations.c.id).where(conversations.c.id == "x"), {})
    assert len(sent) == 1
    for _ in range(2):  # the store's own reads: straight from their second use
        read = await store.get_conversation(conv.id)
        assert read is not None and read.id == conv.id and read.owner == conv.owner
        assert [m.text for m in await store.list_messages(conv.id)] == ["hello"]
    assert len(sent) >= 1 + 2


async def test_a_refused_read_is_a_store_error(postgres_store: PostgresStore) -> None:
    store = postgres_store
    bad = sa.select(sa.cast(sa.bindparam("n", type_=sa.String()), sa.Integer()))
    for _ in range(2):  # SQLAlchemy's way, then straight: the same error
        with pytest.raises(StoreError, match="postgresql"):
            await store._fetch(bad, {"n": "not a number"})
    assert [tuple(r) for r in await store._fetch(bad, {"n": "7"})] == [(7,)]  # still usable


async def test_a_connection_given_back_inside_a_transaction_is_dropped(
    postgres_store: PostgresStore,
) -> None:
    engine = postgres_store.engine
    async with driver_of(engine) as driver:
        await driver.execute("BEGIN")
        await driver.execute("SELECT 1")
    for _ in range(3):  # whichever connection comes next is outside any transaction
        async with driver_of(engine) as driver:
            assert not driver.is_in_transaction()
