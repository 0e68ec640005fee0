"""Schedules in the store, on every engine: the limit, listing, deleting, claiming with a
lease (each due item to one claimer), moving on only while held."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from ostinato.store import Store
from ostinato.store.schedules import Schedule, ScheduleStore, TooManySchedules

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


def schedule(n: int, owner: str = "ann", *, at: datetime = T0) -> Schedule:
    return Schedule(
        f"s{n:05d}",
        owner,
        "c1",
        "reminder",
        f"call the bank {n}",
        "once",
        at.isoformat(),
        "UTC",
        T0 - timedelta(hours=1),
        at,
    )


def schedules_of(store: Store) -> ScheduleStore:
    assert isinstance(store, ScheduleStore)
    return store


async def test_the_limit_refuses_clearly_and_delivered_ones_do_not_count(store: Store) -> None:
    s = schedules_of(store)
    for n in range(3):
        await s.add_schedule(schedule(n), limit=3)
    await s.add_schedule(schedule(9, owner="bob"), limit=3)  # another owner's count
    with pytest.raises(TooManySchedules, match="limit is 3"):
        await s.add_schedule(schedule(3), limit=3)
    assert [x.id for x in await s.schedules("ann")] == ["s00000", "s00001", "s00002"]
    (taken,) = await s.claim_schedules("h1", T0, LEASE, 1)
    done = dataclasses.replace(taken, state="delivered", next_fire=None, holder=None)
    assert await s.move_schedule(done, "h1")
    await s.add_schedule(schedule(3), limit=3)
    assert len(await s.schedules("ann")) == 3


async def test_round_trip_delete_and_owners_apart(store: Store) -> None:
    s = schedules_of(store)
    one = await s.add_schedule(schedule(1), limit=10)
    assert await s.schedule(one.id) == one
    assert not await s.delete_schedule("bob", one.id)
    assert await s.delete_schedule("ann", one.id)
    assert await s.schedule(one.id) is None and await s.schedules("ann") == []


async def test_claims_take_what_is_due_once_and_a_lapsed_lease_again(store: Store) -> None:
    s = schedules_of(store)
    await s.add_schedule(schedule(1), limit=10)
    await s.add_schedule(schedule(2, at=T0 + timedelta(minutes=5)), limit=10)
    assert await s.claim_schedules("h1", T0 - timedelta(seconds=1), LEASE, 10) == []
    (taken,) = await s.claim_schedules("h1", T0, LEASE, 10)
    assert (taken.id, taken.state, taken.holder) == ("s00001", "claimed", "h1")
    assert taken.lease_until == T0 + LEASE
    assert await s.claim_schedules("h2", T0 + timedelta(seconds=10), LEASE, 10) == []
    ran = dataclasses.replace(taken, state="ran", lease_until=T0 + LEASE)
    assert await s.move_schedule(ran, "h1")
    # h1 dies: after its lease, h2 takes the item over in the state h1 left it
    (again,) = await s.claim_schedules("h2", T0 + LEASE, LEASE, 1)
    assert (again.id, again.state, again.holder) == ("s00001", "ran", "h2")
    assert not await s.move_schedule(dataclasses.replace(again, state="delivered"), "h1")
    stored = await s.schedule("s00001")
    assert stored is not None and stored.holder == "h2"


async def test_racing_claimers_never_share_an_item(sql_store: Store) -> None:
    s = schedules_of(sql_store)
    for n in range(40):
        await s.add_schedule(schedule(n, owner=f"o{n}"), limit=10)

    async def claimer(name: str) -> list[str]:
        got: list[str] = []
        while found := await s.claim_schedules(name, T0, LEASE, 3):
            got += [x.id for x in found]
        return got

    results = await asyncio.gather(*(claimer(f"h{i}") for i in range(4)))
    every = [item for got in results for item in got]
    assert sorted(every) == [f"s{n:05d}" for n in range(40)]


async def test_a_revision_changes_an_unheld_schedule_of_its_owner_only(store: Store) -> None:
    s = schedules_of(store)
    one = await s.add_schedule(schedule(1), limit=10)
    later = T0 + timedelta(hours=2)
    revised = dataclasses.replace(one, text="new", kind="cron", spec="0 14 * * *", next_fire=later)
    assert not await s.revise_schedule(dataclasses.replace(revised, owner="bob"))
    assert await s.revise_schedule(revised)
    stored = await s.schedule(one.id)
    assert stored is not None
    assert (stored.text, stored.kind, stored.spec, stored.next_fire) == (
        "new",
        "cron",
        "0 14 * * *",
        later,
    )
    assert await s.claim_schedules("h1", T0, LEASE, 10) == []  # its wake moved too
    paused = dataclasses.replace(stored, next_fire=None)
    assert await s.revise_schedule(paused)
    assert await s.claim_schedules("h1", later + timedelta(days=9), LEASE, 10) == []
    assert await s.revise_schedule(stored)
    (taken,) = await s.claim_schedules("h1", later, LEASE, 10)
    assert not await s.revise_schedule(dataclasses.replace(taken, text="while firing"))
    held = await s.schedule(one.id)
    assert held is not None and held.text == "new" and held.holder == "h1"
