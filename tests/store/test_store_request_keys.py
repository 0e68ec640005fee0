"""``RequestKeys`` on every engine: one record per (owner, key), even when claimed at once."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

from ostinato.store import Store
from ostinato.store.base import utcnow
from ostinato.store.idempotency import RequestKey, RequestKeys


def record(key: str, owner: str = "ann", fingerprint: str = "f1", ttl: float = 60) -> RequestKey:
    now = utcnow()
    return RequestKey(owner, key, fingerprint, now, now + timedelta(seconds=ttl))


async def test_the_first_claim_wins_and_the_next_reads_its_record(store: Store) -> None:
    assert isinstance(store, RequestKeys)
    assert await store.claim_request(record("k1")) is None
    found = await store.claim_request(record("k1", fingerprint="f2"))
    assert found is not None and found.fingerprint == "f1"
    await store.settle_request("ann", "k1", turn_id="t1", after_seq=4, queued_position=7)
    settled = await store.get_request("ann", "k1")
    assert settled is not None
    assert (settled.turn_id, settled.after_seq, settled.queued_position) == ("t1", 4, 7)
    assert settled.expires_at == found.expires_at
    # another owner's key is another record
    assert await store.claim_request(record("k1", owner="bob")) is None
    await store.release_request("ann", "k1")
    assert await store.get_request("ann", "k1") is None
    assert await store.get_request("bob", "k1") is not None


async def test_an_expired_record_is_gone_and_the_key_can_be_claimed_again(store: Store) -> None:
    assert isinstance(store, RequestKeys)
    old = record("k1", ttl=60)
    gone = dataclasses.replace(old, expires_at=utcnow() - timedelta(seconds=1))
    assert await store.claim_request(gone) is None
    assert await store.get_request("ann", "k1") is None
    assert await store.claim_request(old) is None  # the expired record was deleted
    await store.settle_request("ann", "k1", status_code=201, response='{"id": "c1"}')
    found = await store.get_request("ann", "k1")
    assert found is not None and (found.status_code, found.response) == (201, '{"id": "c1"}')


async def test_claims_at_once_leave_one_winner(store: Store) -> None:
    assert isinstance(store, RequestKeys)
    results = await asyncio.gather(
        *(store.claim_request(record("k", fingerprint=f"f{i}")) for i in range(8))
    )
    winners = [i for i, found in enumerate(results) if found is None]
    assert len(winners) == 1
    assert all(found.fingerprint == f"f{winners[0]}" for found in results if found is not None)
