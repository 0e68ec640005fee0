"""Protocol records in the store, on every engine: created once, replaced, read, listed
by owner, conversation and id prefix (newest first, ``%`` and ``_`` taken as they are),
deleted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ostinato.errors import NotFound
from ostinato.store import Store
from ostinato.store.protocol_records import ProtocolRecord, ProtocolRecords, records

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def record(n: int, *, kind: str = "response", owner: str = "ann", cid: str | None = "c1",
           rid: str | None = None) -> ProtocolRecord:  # fmt: skip
    at = T0 + timedelta(seconds=n)
    return ProtocolRecord(kind, rid or f"r{n}", owner, {"n": n, "text": "é"}, at, at, cid)


def records_of(store: Store) -> ProtocolRecords:
    assert isinstance(store, ProtocolRecords)
    return store


async def test_created_once_then_replaced_keeping_its_creation(store: Store) -> None:
    s = records_of(store)
    assert await s.put_record(record(1), create=True)
    assert not await s.put_record(record(2, rid="r1"), create=True)
    assert (await s.get_record("response", "r1")) == record(1)
    later = record(1).replace(data={"n": 5}, updated_at=T0 + timedelta(hours=1), owner="ann")
    assert await s.put_record(later.replace(created_at=T0 + timedelta(days=9)))
    assert await s.get_record("response", "r1") == later
    assert await s.get_record("run", "r1") is None
    assert await s.get_record("response", "r1\x00") is None


async def test_listed_newest_first_by_owner_conversation_and_prefix(store: Store) -> None:
    s = records_of(store)
    for n in range(4):
        await s.put_record(record(n, cid="c1" if n % 2 else "c2"))
    await s.put_record(record(9, owner="bob"))
    await s.put_record(record(8, kind="item", rid="a.b_c%d"))
    await s.put_record(record(7, kind="item", rid="a.bxcyd"))
    mine = await s.list_records("response", owner="ann")
    assert [r.id for r in mine] == ["r3", "r2", "r1", "r0"]
    assert [r.id for r in await s.list_records("response", conversation_id="c1")] == [
        "r9", "r3", "r1",
    ]  # fmt: skip
    assert [r.id for r in await s.list_records("response", owner="ann", limit=1)] == ["r3"]
    assert [r.id for r in await s.list_records("item", prefix="a.b_c%")] == ["a.b_c%d"]
    assert [r.id for r in await s.list_records("item", prefix="a.b")] == ["a.b_c%d", "a.bxcyd"]
    assert await s.list_records("item", prefix="\x00") == []


async def test_deleted(store: Store) -> None:
    s = records_of(store)
    await s.put_record(record(1))
    assert await s.delete_record("response", "r1")
    assert not await s.delete_record("response", "r1")
    assert await s.get_record("response", "r1") is None


def test_a_store_that_keeps_no_records_is_a_404_for_every_protocol() -> None:
    with pytest.raises(NotFound) as raised:
        records(object())
    assert raised.value.status == 404 and "keeps no protocol records" in raised.value.message
