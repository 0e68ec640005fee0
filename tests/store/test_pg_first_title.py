"""A conversation's first title on PostgreSQL is one statement (``store.sql.pg_title``):
no transaction block, the same result as ``UpdateConversation`` the ordinary way, a
title set meanwhile never overwritten, and never two search entries for one title,
however the first title and renames meet."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from ostinato.errors import NotFound
from ostinato.ids import new_id
from ostinato.store import PostgresStore
from ostinato.store.accounts import UpdateConversation
from ostinato.store.base import Conversation, CreateConversation, utcnow
from ostinato.store.sql.pg_title import first_title
from ostinato.store.sql.search_tables import message_search
from tests.store.conftest import raw_statements

ENTRIES = sa.select(message_search.c.text).where(
    message_search.c.conversation_id == sa.bindparam("cid"), message_search.c.message_id.is_(None)
)


async def untitled(store: PostgresStore) -> str:
    now = utcnow()
    cid = new_id()
    await store.write(CreateConversation(Conversation(cid, "idle", now, now, "ann", None, None)))
    return cid


async def entries(store: PostgresStore, cid: str) -> list[str]:
    return [row[0] for row in await store._fetch(ENTRIES, {"cid": cid})]


def statements(store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements the store sends on its raw connections from now on."""
    sent = raw_statements(store, monkeypatch)
    monkeypatch.setattr(store, "_transaction", None)  # no transaction block at all
    return sent


def test_only_a_first_title_with_words_goes_in_one_statement() -> None:
    assert first_title((UpdateConversation("c", title="Trip", expect_title=None),))
    assert not first_title((UpdateConversation("c", title="Trip"),))
    assert not first_title((UpdateConversation("c", title="Trip", expect_title="Old"),))
    assert not first_title((UpdateConversation("c", title="  ", expect_title=None),))
    assert not first_title((UpdateConversation("c", title=None, expect_title=None),))
    op = UpdateConversation("c", title="Trip", metadata={}, expect_title=None)
    assert not first_title((op,))
    both = UpdateConversation("c", title="Trip", expect_title=None)
    assert not first_title((both, both))


async def test_a_first_title_is_one_statement(
    postgres_store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = postgres_store
    cid = await untitled(store)
    sent = statements(store, monkeypatch)
    op = UpdateConversation(cid, title="Trip to Porto", expect_title=None)
    (written,) = await store.write(op)
    assert len(sent) == 1
    stored = await store.get_conversation(cid)
    assert stored is not None and stored.title == written.title == "Trip to Porto"
    assert written.updated_at == stored.updated_at
    assert await entries(store, cid) == ["Trip to Porto"]
    (hit,) = await store.search_messages("porto", owner="ann")
    assert hit.conversation_id == cid and hit.conversation_title == "Trip to Porto"


async def test_a_title_set_meanwhile_is_kept(postgres_store: PostgresStore) -> None:
    store = postgres_store
    cid = await untitled(store)
    await store.write(UpdateConversation(cid, title="Named by hand"))
    (kept,) = await store.write(UpdateConversation(cid, title="Made", expect_title=None))
    assert kept.title == "Named by hand"
    assert await entries(store, cid) == ["Named by hand"]
    with pytest.raises(NotFound):
        await store.write(UpdateConversation(new_id(), title="Made", expect_title=None))


async def test_first_titles_and_renames_at_once_leave_one_entry(
    postgres_store: PostgresStore,
) -> None:
    store = postgres_store
    for _ in range(10):
        cid = await untitled(store)
        ops = [UpdateConversation(cid, title=f"first {i}", expect_title=None) for i in range(3)]
        ops += [UpdateConversation(cid, title=f"renamed {i}") for i in range(3)]
        await asyncio.gather(*(store.write(op) for op in ops))
        stored = await store.get_conversation(cid)
        assert stored is not None and await entries(store, cid) == [stored.title]
