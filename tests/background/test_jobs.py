"""Idle-gated jobs with a controllable clock, on every engine: each runs once per stretch
of its own idleness, within its model calls per day (work left waits for the next day),
once across two pollers racing and after a claim lost to a crash; consolidation merges
duplicates and judges conflicts, stale unused facts lapse, recent turns fold into an
episode recall finds. None of them writes a chat row."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest

from ostinato.background.jobs import JobRunner
from ostinato.background.registry import default_jobs
from ostinato.config.background import EpisodesSection, JobSection, JobsSection, LapseSection
from ostinato.errors import QuotaExhausted
from ostinato.memory.facts import Memory
from ostinato.messages import Message, TextBlock
from ostinato.models.scripted import ScriptedModel, error_step, text_step
from ostinato.store.base import (
    AppendMessage,
    Conversation,
    CreateConversation,
    RememberFact,
    SetConversationState,
    Store,
    utcnow,
)
from ostinato.store.jobs import ClaimJob, NoteFactsUsed
from tests.store.conftest import postgres_url, store

__all__ = ["postgres_url", "store"]


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()  # the store stamps rows with the real time

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kw: float) -> None:
        self.now += timedelta(**kw)


@dataclass
class World:
    store: Store
    model: ScriptedModel
    clock: Clock

    def runner(self, holder: str = "h1", **jobs: JobSection) -> JobRunner:
        off = {
            "consolidate": JobSection(enabled=False),
            "lapse": LapseSection(enabled=False),
            "episodes": EpisodesSection(enabled=False),
        }
        settings = JobsSection(**{**off, **jobs})
        return JobRunner(
            self.store, default_jobs(settings), settings, model=self.model, holder=holder,
            clock=self.clock,
        )  # fmt: skip

    async def chat(self, cid: str, *lines: str) -> None:
        """An exchange in conversation ``cid`` of ann's (made if need be), ending a turn."""
        if await self.store.get_conversation(cid) is None:
            now = utcnow()
            await self.store.write(CreateConversation(Conversation(cid, "idle", now, now, "ann")))
        roles = ("user", "assistant")
        ops = [
            AppendMessage(cid, Message(roles[n % 2], (TextBlock(line),)))  # type: ignore[arg-type]
            for n, line in enumerate(lines)
        ]
        await self.store.write(*ops, SetConversationState(cid, "idle"))
        self.clock.now = utcnow()  # the store's stamp: idleness counts from here

    async def rows(self) -> int:
        convs = await self.store.list_conversations(owner="ann")
        return sum([len(await self.store.list_messages(c.id)) for c in convs])


@pytest.fixture
async def world(store: Store) -> AsyncIterator[World]:
    yield World(store, ScriptedModel(), Clock())


async def test_each_job_waits_for_its_own_stretch_of_idleness(world: World) -> None:
    await world.chat("c1", "I must call the bank on Friday", "Noted: the bank, Friday.")
    await world.store.write(RememberFact("ann", "Ann banks with Acme"))
    await world.store.write(RememberFact("ann", "ann banks with acme."))
    runner = world.runner(consolidate=JobSection(idle_minutes=30), episodes=EpisodesSection())
    world.model.add(text_step("Ann planned to call the bank on Friday."))
    rows = await world.rows()
    world.clock.advance(minutes=10)
    assert await runner.tick() == []
    world.clock.advance(minutes=6)
    (episode,) = await runner.tick()  # 15 minutes: episodes, not consolidation
    assert episode.job == "episodes" and episode.model_calls == 1
    world.clock.advance(minutes=15)
    (merged,) = await runner.tick()
    assert merged.job == "consolidate" and merged.model_calls == 0
    assert [c["action"] for c in merged.changes] == ["merged"]
    world.clock.advance(hours=3)
    assert await runner.tick() == []  # once per stretch
    assert await world.rows() == rows  # no chat row
    hits = await Memory(world.store).recall("ann", "bank Friday")
    assert any(h.fact.subject == "episode" and "Friday" in h.fact.text for h in hits)
    assert [f.text for f in await world.store.list_memories("ann") if f.subject is None] == [
        "ann banks with acme."
    ]
    await world.chat("c1", "Also the dentist", "The dentist, too.")  # active again
    world.clock.advance(minutes=16)
    world.model.add(text_step("Ann added the dentist."))
    (again,) = await runner.tick()
    assert "dentist" in again.changes[0]["text"]


async def test_calls_per_day_bound_a_job_and_the_rest_waits_for_the_next_day(
    world: World,
) -> None:
    await world.chat("c1", "Plan a trip to Lyon", "Lyon it is.")
    await world.chat("c2", "Book the dentist", "Booked.")
    start = world.clock.now
    if (start + timedelta(hours=2)).date() != start.date():  # run late in a UTC day: the
        # day's calls would reset half way; start just after midnight instead (the rows
        # are older then, which only makes the owner idle sooner)
        world.clock.now = datetime.combine(
            start.date() + timedelta(days=1), datetime.min.time(), start.tzinfo
        ) + timedelta(minutes=1)
    runner = world.runner(episodes=EpisodesSection(calls_per_day=1))
    world.model.add(text_step("Ann booked the dentist."))
    world.clock.advance(minutes=16)
    (first,) = await runner.tick()
    assert len(first.changes) == 1
    world.clock.advance(hours=1)
    assert await runner.tick() == []  # no call left today: the other waits
    (state,) = await world.store.job_states(owner="ann", job="episodes")
    assert state.calls == 1 and state.not_before is not None
    world.clock.now = state.not_before + timedelta(minutes=1)
    world.model.add(text_step("Ann planned a trip to Lyon."))
    (second,) = await runner.tick()
    assert "Lyon" in second.changes[0]["text"]
    episodes = [f for f in await world.store.list_memories("ann") if f.subject == "episode"]
    assert len(episodes) == 2


async def test_two_pollers_racing_run_a_job_once(world: World) -> None:
    await world.chat("c1", "Plan a trip to Lyon", "Lyon it is.")
    world.model.add(text_step("Ann planned a trip to Lyon."), text_step("again"))
    one, two = (
        world.runner("h1", episodes=EpisodesSection()),
        world.runner("h2", episodes=EpisodesSection()),
    )
    world.clock.advance(minutes=16)
    done = await asyncio.gather(one.tick(), two.tick())
    assert sum(len(d) for d in done) == 1
    assert len(await world.store.job_runs("ann")) == 1
    assert len([f for f in await world.store.list_memories("ann") if f.subject]) == 1


async def test_a_claim_lost_to_a_crash_is_run_after_its_lease(world: World) -> None:
    await world.chat("c1", "Plan a trip to Lyon", "Lyon it is.")
    world.clock.advance(minutes=16)
    (active,) = [a for o, a in await world.store.idle_owners(
        world.clock.now - timedelta(days=1), world.clock.now
    ) if o == "ann"]  # fmt: skip
    lease = world.clock.now + timedelta(seconds=900)
    await world.store.write(ClaimJob("ann", "episodes", "dead", world.clock.now, lease, active))
    runner = world.runner(episodes=EpisodesSection())
    assert await runner.tick() == []
    world.clock.advance(seconds=900)
    world.model.add(text_step("Ann planned a trip to Lyon."))
    (run,) = await runner.tick()
    assert run.status == "ok"


async def test_consolidation_judges_conflicts_once(world: World) -> None:
    await world.chat("c1", "hello", "hi")
    for text, subject in (
        ("Ann lives in Paris", "home city"),
        ("Ann lives in Lyon", "home city"),
        ("Ann was born on 3 May", "birthday"),
        ("Ann was born on 5 May", "birthday"),
    ):
        await world.store.write(RememberFact("ann", text, subject=subject))
    world.model.add(text_step('{"verdict": "conflict"}'), text_step('{"verdict": "newer"}'))
    runner = world.runner(consolidate=JobSection(idle_minutes=30))
    world.clock.advance(minutes=31)
    (run,) = await runner.tick()
    assert run.model_calls == 2
    actions = {c["action"]: c for c in run.changes}
    assert actions["conflict"]["subject"] == "birthday"
    assert actions["superseded"]["text"] == "Ann lives in Lyon"
    current = {f.text for f in await world.store.list_memories("ann")}
    assert current == {"Ann lives in Lyon", "Ann was born on 3 May", "Ann was born on 5 May"}
    await world.chat("c1", "again", "yes")
    world.clock.advance(minutes=31)
    assert await runner.tick() == []  # the conflict is not judged again; nothing else to do
    assert world.model.remaining == 0


async def test_stale_unused_facts_lapse_and_used_ones_stay(world: World) -> None:
    (old,) = await world.store.write(RememberFact("ann", "Ann liked jazz"))
    (used,) = await world.store.write(RememberFact("ann", "Ann likes tea"))
    await world.chat("c1", "hello", "hi")
    world.clock.advance(days=2)  # both recorded two days ago; tea recalled since
    await world.store.write(NoteFactsUsed("ann", (used.id,), world.clock.now))
    runner = world.runner(lapse=LapseSection(stale_days=1))
    (run,) = await runner.tick()
    assert run.model_calls == 0
    assert [(c["action"], c["memory_id"]) for c in run.changes] == [("lapsed", old.id)]
    assert [f.id for f in await world.store.list_memories("ann")] == [used.id]
    closed = await world.store.get_memory(old.id)
    assert closed is not None and closed.valid_to is not None  # closed, kept


async def test_a_failed_model_call_is_a_failed_run_and_closes_the_stretch(world: World) -> None:
    await world.chat("c1", "Plan a trip to Lyon", "Lyon it is.")
    world.model.add(error_step(QuotaExhausted("out of credit")))
    runner = world.runner(episodes=EpisodesSection())
    world.clock.advance(minutes=16)
    (run,) = await runner.tick()
    assert run.status == "failed" and "out of credit" in (run.error or "")
    assert run.changes == [] and run.model_calls == 1
    world.clock.advance(hours=1)
    assert await runner.tick() == []


async def test_recall_notes_the_use_of_what_it_returns_once_a_day(world: World) -> None:
    (tea,) = await world.store.write(RememberFact("ann", "Ann likes tea"))
    memory = Memory(world.store)
    assert await world.store.fact_uses("ann") == {}
    await memory.recall("ann", "tea")
    first = await world.store.fact_uses("ann")
    assert list(first) == [tea.id]
    await memory.recall("ann", "tea")
    assert await world.store.fact_uses("ann") == first  # noted once today, not again
    await memory.recall("ann", "tea", use=False)  # e.g. extraction's look for duplicates
    assert await world.store.fact_uses("ann") == first
