"""Background jobs in the store, on every engine: a claim is taken once per stretch of
idleness and only while no live lease holds it; finishing is a compare-and-set on the
holder that rolls back what it was written with; idle owners, runs and facts' last use
are read back; schedules keep their firing's run_id and result."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from ostinato.errors import Conflict
from ostinato.store import Store
from ostinato.store.base import Conversation, CreateConversation, ForgetFact, RememberFact
from ostinato.store.jobs import ClaimJob, FinishJob, JobRun, JobState, NoteFactsUsed
from ostinato.store.schedules import Schedule, ScheduleStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(minutes=10)


def claim(
    holder: str, *, now: datetime = T0, active: datetime = T0, job: str = "lapse"
) -> ClaimJob:
    return ClaimJob("ann", job, holder, now, now + LEASE, active)


async def test_a_claim_is_taken_once_per_stretch_of_idleness(store: Store) -> None:
    (taken,) = await store.write(claim("h1"))
    assert isinstance(taken, JobState) and (taken.holder, taken.calls) == ("h1", 0)
    assert (await store.write(claim("h2")))[0] is None  # held
    done = dataclasses.replace(taken, active_at=T0, last_run_at=T0, day="2026-03-01", calls=2)
    (stored,) = await store.write(FinishJob(done, "h1"))
    assert stored.holder is None and stored.calls == 2
    (read,) = await store.job_states(owner="ann")
    assert (read.holder, read.lease_until, read.calls, read.active_at) == (None, None, 2, T0)
    assert (await store.write(claim("h2")))[0] is None  # it ran after this activity
    later = T0 + timedelta(hours=1)
    (again,) = await store.write(claim("h2", now=later, active=later))
    assert again.holder == "h2" and again.calls == 2 and again.day == "2026-03-01"
    (states,) = [await store.job_states(owner="ann")]
    assert [(s.job, s.holder) for s in states] == [("lapse", "h2")]
    assert await store.job_states(job="lapse") == states
    assert await store.job_states(owner="bob") == []


async def test_a_lapsed_lease_is_taken_over_and_not_before_holds_it_back(store: Store) -> None:
    await store.write(claim("dies"))
    assert (await store.write(claim("h2", now=T0 + LEASE - timedelta(seconds=1))))[0] is None
    (over,) = await store.write(claim("h2", now=T0 + LEASE))
    assert over.holder == "h2"
    waiting = dataclasses.replace(over, not_before=T0 + timedelta(days=1))
    await store.write(FinishJob(waiting, "h2"))
    later = T0 + timedelta(hours=2)
    assert (await store.write(claim("h3", now=later, active=later)))[0] is None
    tomorrow = T0 + timedelta(days=1)
    assert (await store.write(claim("h3", now=tomorrow, active=later)))[0] is not None


async def test_finishing_without_the_claim_rolls_back_what_it_wrote(store: Store) -> None:
    (fact,) = await store.write(RememberFact("ann", "Ann likes tea"))
    (taken,) = await store.write(claim("dies"))
    await store.write(claim("h2", now=T0 + LEASE))  # taken over
    run = JobRun("r1", "ann", "lapse", T0, T0, "ok", [{"closed": fact.id}])
    with pytest.raises(Conflict):
        await store.write(ForgetFact("ann", fact.id), FinishJob(taken, "dies", run))
    current = await store.list_memories("ann")
    assert [f.id for f in current] == [fact.id]  # not forgotten
    assert await store.job_runs("ann") == []


async def test_runs_are_listed_newest_first_per_owner(store: Store) -> None:
    (taken,) = await store.write(claim("h1"))
    first = JobRun("r1", "ann", "lapse", T0, T0 + timedelta(seconds=2), "ok", [{"a": 1}], 0, 0)
    await store.write(FinishJob(taken, "h1", first))
    later = T0 + timedelta(hours=1)
    (taken,) = await store.write(claim("h1", now=later, active=later))
    second = JobRun("r2", "ann", "lapse", later, later, "failed", [], 3, 120, 0.002, "boom")
    await store.write(FinishJob(taken, "h1", second))
    assert [r.id for r in await store.job_runs("ann")] == ["r2", "r1"]
    assert await store.job_runs("ann", limit=1) == [second]
    assert await store.job_run("r1") == first
    assert await store.job_run("nope") is None
    assert await store.job_runs("bob") == []


async def test_idle_owners_are_those_active_then_quiet(store: Store) -> None:
    for cid, owner in (("c1", "ann"), ("c2", "bob"), ("c3", None)):
        at = T0 if owner != "bob" else T0 + timedelta(minutes=50)
        await store.write(CreateConversation(Conversation(cid, "idle", at, at, owner=owner)))
    found = await store.idle_owners(T0 - timedelta(days=1), T0 + timedelta(minutes=30))
    assert found == [("ann", T0)]
    both = await store.idle_owners(T0 - timedelta(days=1), T0 + timedelta(hours=1))
    assert [o for o, _ in both] == ["ann", "bob"]
    assert await store.idle_owners(T0, T0 + timedelta(hours=1)) == both[1:]


async def test_facts_use_is_kept_per_scope(store: Store) -> None:
    await store.write(NoteFactsUsed("ann", ("m1", "m2"), T0))
    await store.write(NoteFactsUsed("ann", ("m2",), T0 + timedelta(days=1)))
    assert await store.fact_uses("ann") == {"m1": T0, "m2": T0 + timedelta(days=1)}
    assert await store.fact_uses("bob") == {}


async def test_claims_racing_take_one_each(store: Store) -> None:
    found = await asyncio.gather(*(store.write(claim(f"h{n}")) for n in range(8)))
    assert sum(1 for (state,) in found if state is not None) == 1


async def test_a_schedule_keeps_its_firings_run_id_and_result(store: Store) -> None:
    assert isinstance(store, ScheduleStore)
    made = Schedule("s1", "ann", "c1", "prompt", "plan", "once", "", "UTC", T0, T0)
    await store.add_schedule(made, 10)
    (taken,) = await store.claim_schedules("h1", T0, LEASE, 5)
    ran = dataclasses.replace(taken, state="ran", run_id="run_1", result="Your plan: rest.")
    assert await store.move_schedule(ran, "h1")
    stored = await store.schedule("s1")
    assert stored is not None and (stored.run_id, stored.result) == ("run_1", "Your plan: rest.")
