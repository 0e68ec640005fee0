"""API keys, limit counters and conversation settings, on every engine; limits shared by
two stores on one database (two server processes) admit exactly up to the limit."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from ostinato.errors import NotFound, StoreError
from ostinato.ids import new_id
from ostinato.store import PostgresStore, SQLiteStore, Store
from ostinato.store.accounts import (
    AcquireSlot,
    Admission,
    ApiKey,
    CreateApiKey,
    RecordEvent,
    ReleaseSlots,
    RenewSlots,
    RevokeApiKey,
    UpdateConversation,
)
from ostinato.store.base import Conversation, CreateConversation, utcnow
from tests.store.conftest import open_postgres


def _key(owner: str = "ann", **kw: object) -> ApiKey:
    return ApiKey(
        id=new_id(), owner=owner, name="laptop", secret_hash="ab" * 32, created_at=utcnow(), **kw
    )  # type: ignore[arg-type]


async def test_keys_are_stored_listed_and_revoked(store: Store) -> None:
    ann, bob = _key("ann"), _key("bob", expires_at=utcnow() + timedelta(days=1))
    await store.write(CreateApiKey(ann), CreateApiKey(bob))
    assert await store.get_api_key(ann.id) == ann
    assert await store.get_api_key("nope") is None
    assert await store.get_api_key("no\x00pe") is None
    assert [k.id for k in await store.list_api_keys()] == [ann.id, bob.id]
    assert [k.id for k in await store.list_api_keys("bob")] == [bob.id]
    when = utcnow()
    (revoked,) = await store.write(RevokeApiKey(ann.id, when))
    assert isinstance(revoked, ApiKey) and revoked.revoked_at is not None
    assert not revoked.usable(utcnow())
    (again,) = await store.write(RevokeApiKey(ann.id, when + timedelta(hours=1)))
    assert again.revoked_at == revoked.revoked_at  # the first revocation stands
    with pytest.raises(NotFound):
        await store.write(RevokeApiKey("nope", when))
    with pytest.raises(StoreError):
        await store.write(CreateApiKey(ann))


async def test_a_slot_is_held_up_to_the_limit_released_and_expires(store: Store) -> None:
    later = utcnow() + timedelta(minutes=1)
    first, second, third = new_id(), new_id(), new_id()
    (a,) = await store.write(AcquireSlot("ann", "turn", first, 2, later))
    (b,) = await store.write(AcquireSlot("ann", "turn", second, 2, later))
    (c,) = await store.write(AcquireSlot("ann", "turn", third, 2, later, retry_after=7))
    assert (a.granted, b.granted, c) == (True, True, Admission(False, 7, 2))
    (other,) = await store.write(AcquireSlot("bob", "turn", new_id(), 2, later))
    (stream,) = await store.write(AcquireSlot("ann", "stream", new_id(), 1, later))
    assert other.granted and stream.granted  # per owner, per kind
    await store.write(ReleaseSlots((first,)))
    (d,) = await store.write(AcquireSlot("ann", "turn", third, 2, later))
    assert d.granted
    # a slot whose holder stopped renewing it (a crashed process) frees itself
    await store.write(RenewSlots((second, third), utcnow() - timedelta(seconds=1)))
    (e,) = await store.write(AcquireSlot("ann", "turn", new_id(), 2, later))
    (f,) = await store.write(AcquireSlot("ann", "turn", new_id(), 2, later))
    assert e.granted and f.granted and e.held == 0


async def test_events_are_counted_over_a_sliding_window(store: Store) -> None:
    results = [(await store.write(RecordEvent("ann", "turn", 3, 60.0)))[0] for _ in range(4)]
    assert [r.granted for r in results] == [True, True, True, False]
    assert 0 < results[3].retry_after <= 60
    (bob,) = await store.write(RecordEvent("bob", "turn", 3, 60.0))
    assert bob.granted
    (short,) = await store.write(RecordEvent("cy", "turn", 1, 0.000001))
    (again,) = await store.write(RecordEvent("cy", "turn", 1, 0.000001))
    assert short.granted and again.granted  # the first one left the window


async def test_a_refused_write_takes_nothing(store: Store) -> None:
    slot = new_id()
    with pytest.raises(NotFound):
        await store.write(
            AcquireSlot("ann", "turn", slot, 1, utcnow() + timedelta(minutes=1)),
            RevokeApiKey("nope", utcnow()),
        )
    (taken,) = await store.write(AcquireSlot("ann", "turn", new_id(), 1, utcnow() + timedelta(1)))
    assert taken.granted


async def test_conversation_settings_change_and_unset_fields_stay(store: Store) -> None:
    now = utcnow()
    conv = Conversation(new_id(), "idle", now, now, owner="ann", title="old", metadata={"a": 1})
    await store.write(CreateConversation(conv))
    (changed,) = await store.write(UpdateConversation(conv.id, title="new"))
    assert (changed.title, changed.metadata, changed.persona) == ("new", {"a": 1}, None)
    await store.write(UpdateConversation(conv.id, metadata={"model": "x:y"}, persona="chef"))
    found = await store.get_conversation(conv.id)
    assert found is not None
    assert (found.title, found.metadata, found.persona, found.owner) == (
        "new",
        {"model": "x:y"},
        "chef",
        "ann",
    )
    assert found.updated_at >= conv.updated_at
    (cleared,) = await store.write(UpdateConversation(conv.id, title=None))
    assert cleared.title is None
    with pytest.raises(NotFound):
        await store.write(UpdateConversation("nope", title="x"))


async def _race(first: Store, second: Store) -> list[bool]:
    """Twenty acquisitions of a limit of three, split over two stores at once."""
    until = utcnow() + timedelta(minutes=1)
    tries = [
        (first if i % 2 else second).write(AcquireSlot("ann", "turn", new_id(), 3, until))
        for i in range(20)
    ]
    return [result[0].granted for result in await asyncio.gather(*tries)]


async def test_two_sqlite_stores_on_one_file_share_a_limit(tmp_path: Path) -> None:
    first = await SQLiteStore.open(tmp_path / "shared.db")
    second = await SQLiteStore.open(tmp_path / "shared.db")
    try:
        assert sum(await _race(first, second)) == 3
    finally:
        await first.close()
        await second.close()


async def test_two_postgres_stores_on_one_database_share_a_limit(postgres_url: sa.URL) -> None:
    first = await open_postgres(postgres_url)
    second = await PostgresStore.open(postgres_url)
    try:
        assert sum(await _race(first, second)) == 3
    finally:
        await first.close()
        await second.close()
