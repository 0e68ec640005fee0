"""``LeaseStore`` on every engine: leases, their clock, and compare-and-set claims."""

from __future__ import annotations

from datetime import timedelta

from ostinato.messages import Message, TextBlock
from ostinato.store import Store
from ostinato.store.base import (
    CreateConversation,
    Enqueue,
    QueuedInput,
    StartTurn,
    TakeQueued,
    Turn,
    utcnow,
)
from ostinato.store.leases import LeaseStore, ServerLease
from tests.store.test_store_ops import conversation


def lease(lease_id: str, pid: int = 4242) -> ServerLease:
    now = utcnow()
    return ServerLease(lease_id, "host", "machine", pid, "123", now, now, now)


async def test_a_lease_is_written_renewed_and_released(store: Store) -> None:
    assert isinstance(store, LeaseStore)
    before = utcnow()
    stored = await store.acquire_lease(lease("s1"), ttl=30)
    assert stored.id == "s1" and stored.pid == 4242 and stored.pid_start == "123"
    assert stored.expires_at - stored.renewed_at == timedelta(seconds=30)
    assert stored.expires_at > before + timedelta(seconds=29)
    await store.acquire_lease(lease("s2"), ttl=30)
    view = await store.list_leases()
    assert {found.id for found in view.leases} == {"s1", "s2"}
    assert view.now >= before
    assert await store.renew_lease("s1", ttl=60)
    (renewed,) = [f for f in (await store.list_leases()).leases if f.id == "s1"]
    assert renewed.expires_at > stored.expires_at
    await store.release_lease("s1")
    assert not await store.renew_lease("s1", ttl=60)  # gone: the holder must know
    assert [found.id for found in (await store.list_leases()).leases] == ["s2"]
    again = await store.acquire_lease(lease("s2"), ttl=5)  # written again: one row
    assert [found.id for found in (await store.list_leases()).leases] == ["s2"]
    assert again.expires_at - again.renewed_at == timedelta(seconds=5)


async def test_a_dead_lease_is_dropped_only_if_not_renewed_since(store: Store) -> None:
    assert isinstance(store, LeaseStore)
    stored = await store.acquire_lease(lease("s1"), ttl=30)
    assert await store.renew_lease("s1", ttl=30)
    assert not await store.drop_lease("s1", stored.expires_at)  # renewed meanwhile
    (current,) = (await store.list_leases()).leases
    assert await store.drop_lease("s1", current.expires_at)
    assert (await store.list_leases()).leases == []


async def test_turns_and_queued_inputs_carry_their_holder_and_are_claimed_once(
    store: Store,
) -> None:
    assert isinstance(store, LeaseStore)
    made = conversation()
    cid = made.id
    await store.write(CreateConversation(made))
    turn = Turn("t1", cid, "r1", "running", utcnow(), holder="s1")
    item = QueuedInput("q1", cid, Message("user", (TextBlock("later"),)), utcnow(), holder="s1")
    await store.write(StartTurn(turn), Enqueue(item))
    assert (await store.get_turn("t1")).holder == "s1"  # type: ignore[union-attr]
    (queued,) = await store.list_queued(cid)
    assert queued.holder == "s1"
    (running,) = await store.running_turns()
    assert running.holder == "s1"

    assert not await store.claim_turn("t1", "s9", "s2")  # not held by s9
    assert await store.claim_turn("t1", "s1", "s2")
    assert not await store.claim_turn("t1", "s1", "s3")  # s2 won: s3 leaves it alone
    assert (await store.get_turn("t1")).holder == "s2"  # type: ignore[union-attr]

    assert await store.claim_queued("q1", "s1", "s2")
    assert not await store.claim_queued("q1", "s1", "s3")
    assert (await store.list_queued(cid))[0].holder == "s2"


async def test_claims_from_nobody_and_of_taken_inputs(store: Store) -> None:
    """A turn with no holder (written without a lease) is claimed from ``None``; a queued
    input that was taken cannot be claimed at all."""
    assert isinstance(store, LeaseStore)
    made = conversation()
    await store.write(CreateConversation(made))
    item = QueuedInput("q1", made.id, Message("user", (TextBlock("x"),)), utcnow())
    await store.write(StartTurn(Turn("t1", made.id, "r1", "running", utcnow())), Enqueue(item))
    assert await store.claim_turn("t1", None, "s1")
    assert (await store.get_turn("t1")).holder == "s1"  # type: ignore[union-attr]
    await store.write(TakeQueued("q1"))
    assert not await store.claim_queued("q1", None, "s1")
