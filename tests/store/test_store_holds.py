"""Conversation holds on both SQL engines (ostinato.holds): one live server's worker
holds a conversation; another cannot take it until it is released or its holder's lease
is gone."""

from __future__ import annotations

from ostinato.ids import new_id
from ostinato.leases import Lease
from ostinato.store import PostgresStore, SQLiteStore
from ostinato.store.base import (
    Conversation,
    CreateConversation,
    FinishTurn,
    StartTurn,
    Turn,
    utcnow,
)


async def test_one_live_holder_at_a_time(sql_store: SQLiteStore | PostgresStore) -> None:
    a, b = Lease(sql_store), Lease(sql_store)
    await a.acquire()
    await b.acquire()
    assert await sql_store.claim_conversation("c1", a.id, "wa")
    assert not await sql_store.claim_conversation("c1", b.id, "wb")
    assert await sql_store.held_elsewhere("c1", b.id)
    assert not await sql_store.held_elsewhere("c1", a.id)
    assert await sql_store.claim_conversation("c1", a.id, "wa2")  # a's next worker
    await sql_store.release_conversation("c1", "wa")  # the old worker's: not the hold now
    assert not await sql_store.claim_conversation("c1", b.id, "wb")
    await sql_store.release_conversation("c1", "wa2")
    assert not await sql_store.held_elsewhere("c1", b.id)
    assert await sql_store.claim_conversation("c1", b.id, "wb")
    assert await sql_store.claim_conversation("c2", a.id, "wa")  # others are apart


async def test_a_gone_holders_hold_is_taken(sql_store: SQLiteStore | PostgresStore) -> None:
    a, b = Lease(sql_store), Lease(sql_store)
    await a.acquire()
    await b.acquire()
    assert await sql_store.claim_conversation("c1", a.id, "wa")
    await sql_store.release_lease(a.id)  # dropped (dead) or released: not live
    assert not await sql_store.held_elsewhere("c1", b.id)
    assert await sql_store.claim_conversation("c1", b.id, "wb")
    assert await sql_store.held_elsewhere("c1", a.id)


async def test_no_hold_while_a_gone_servers_turn_is_still_marked_running(
    sql_store: SQLiteStore | PostgresStore,
) -> None:
    a, b = Lease(sql_store), Lease(sql_store)
    await a.acquire()
    await b.acquire()
    conversation = Conversation(new_id(), "running", utcnow(), utcnow())
    turn = Turn(new_id(), conversation.id, new_id(), "running", utcnow(), holder=a.id)
    await sql_store.write(CreateConversation(conversation), StartTurn(turn))
    await sql_store.release_lease(a.id)  # a died; recovery has not closed its turn yet
    assert not await sql_store.claim_conversation(conversation.id, b.id, "wb")
    await sql_store.write(FinishTurn(turn.id, conversation.id, "interrupted", utcnow()))
    assert await sql_store.claim_conversation(conversation.id, b.id, "wb")
