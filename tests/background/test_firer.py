"""The poller with a controllable clock: a reminder (no model call) and a prompt (a
normal turn, its trigger hidden) each delivered once at their time; a process killed
between the steps is taken over after its lease without doubling; a recurring schedule
whose slots were missed while nothing ran fires once, saying how late."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ostinato.background.firer import MARKER, Firer
from ostinato.background.schedules import Schedules
from ostinato.config.background import BackgroundSection
from ostinato.frames import MessageCommitted
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.store import open_store
from ostinato.store.base import Store
from ostinato.store.memory import MemoryStore

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
SETTINGS = BackgroundSection(lease_seconds=30)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kw: float) -> None:
        self.now += timedelta(**kw)


class Killed(BaseException):
    """A process dying between two steps (not an error the poller would catch)."""


@dataclass
class World:
    runtime: Runtime
    model: ScriptedModel
    schedules: Schedules
    clock: Clock
    cid: str

    def firer(self, holder: str, kill_at: str | None = None) -> Firer:
        def kill(step: str) -> None:
            if step == kill_at:
                raise Killed(step)

        return Firer(self.runtime, self.schedules, holder, kill=kill)


@pytest.fixture(params=["memory", "sqlite"])
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    store: Store = (
        MemoryStore()
        if request.param == "memory"
        else await open_store(f"sqlite:///{tmp_path}/s.db")
    )
    model = ScriptedModel()
    runtime = Runtime(store, model=model)
    clock = Clock()
    conversation = await runtime.create_conversation(owner="ann")
    yield World(runtime, model, Schedules(store, SETTINGS, clock), clock, conversation.id)
    await runtime.close()


async def marked(world: World, schedule_id: str) -> list[str]:
    rows = await world.runtime.store.list_messages(world.cid, include_hidden=True)
    return [r.role for r in rows if str(r.metadata.get(MARKER, "")).startswith(schedule_id)]


async def test_a_reminder_is_an_assistant_row_and_a_frame_at_its_time(world: World) -> None:
    made = await world.schedules.create(
        "ann", world.cid, "in 20 minutes", "Call the bank", mode="reminder"
    )
    firer = world.firer("h1")
    watching = world.runtime.bus.subscribe(world.cid)
    world.clock.advance(minutes=19)
    assert await firer.tick() == []
    world.clock.advance(minutes=1)
    (fired,) = await firer.tick()
    assert fired.id == made.id
    rows = await world.runtime.store.list_messages(world.cid, include_hidden=False)
    assert [(r.role, r.text) for r in rows] == [("assistant", "Call the bank")]
    frame = await watching.__anext__()
    assert isinstance(frame, MessageCommitted) and frame.run_id.startswith("sch_")
    assert frame.message.text == "Call the bank"
    stored = await world.schedules.store.schedule(made.id)
    assert stored is not None and (stored.state, stored.fired, stored.next_fire) == (
        "delivered",
        1,
        None,
    )
    assert await world.schedules.list("ann") == []  # delivered ones leave the list
    world.clock.advance(hours=1)
    assert await firer.tick() == []
    assert world.model.requests == []  # no model call


async def test_a_prompt_is_answered_by_a_turn_with_its_trigger_hidden(world: World) -> None:
    made = await world.schedules.create(
        "ann", world.cid, "in 1 minute", "Remind me to call the bank"
    )
    world.model.add(text_step("Time to call the bank!"))
    world.clock.advance(minutes=1)
    await world.firer("h1").tick()
    await world.runtime.settle(10)
    shown = await world.runtime.store.list_messages(world.cid, include_hidden=False)
    assert [(r.role, r.text) for r in shown] == [("assistant", "Time to call the bank!")]
    assert await marked(world, made.id) == ["user"]
    (asked,) = world.model.requests
    assert "Remind me to call the bank" in asked.messages[-1].text  # the model sees it
    stored = await world.schedules.store.schedule(made.id)
    assert stored is not None and stored.state == "delivered"


@pytest.mark.parametrize("step", ["triggered", "ran"])
async def test_a_process_killed_between_steps_is_taken_over_once(world: World, step: str) -> None:
    made = await world.schedules.create("ann", world.cid, "in 1 minute", "Stretch", mode="reminder")
    world.clock.advance(minutes=1)
    with pytest.raises(Killed):
        await world.firer("dies", kill_at=step).tick()
    assert await world.firer("other").tick() == []  # still held: its lease has not run out
    world.clock.advance(seconds=SETTINGS.lease_seconds)
    (taken,) = await world.firer("other").tick()
    assert taken.state == ("claimed" if step == "triggered" else "ran")
    assert await marked(world, made.id) == ["assistant"]  # once, not twice
    stored = await world.schedules.store.schedule(made.id)
    assert stored is not None and (stored.state, stored.fired) == ("delivered", 1)


async def test_missed_slots_fire_once_and_say_how_late(world: World) -> None:
    made = await world.schedules.create(
        "ann", world.cid, "every 15m", "Drink water", mode="reminder"
    )
    world.clock.advance(hours=2)  # every server was down for eight slots
    (fired,) = await world.firer("h1").tick()
    assert fired.id == made.id
    assert await world.firer("h1").tick() == []
    assert await marked(world, made.id) == ["assistant"]
    stored = await world.schedules.store.schedule(made.id)
    assert stored is not None and stored.state == "due" and stored.fired == 1
    assert stored.late_seconds == pytest.approx(105 * 60)
    assert stored.next_fire == world.clock.now + timedelta(minutes=15)
    world.clock.advance(minutes=15)
    await world.firer("h1").tick()
    assert await marked(world, made.id) == ["assistant", "assistant"]


async def test_a_reminder_waits_while_a_turn_runs(world: World) -> None:
    from tests.server.people import GatedModel

    gated = GatedModel()
    made = await world.schedules.create(
        "ann", world.cid, "in 1 minute", "Stand up", mode="reminder"
    )
    handle = await world.runtime.start_turn(world.cid, "hello", model=gated)
    world.clock.advance(minutes=1)
    await world.firer("h1").tick()
    assert await marked(world, made.id) == []
    gated.open_all()
    await handle.result()
    world.clock.advance(seconds=1)
    await world.firer("h1").tick()
    assert await marked(world, made.id) == ["assistant"]


async def test_a_late_prompt_says_how_late(world: World) -> None:
    await world.schedules.create("ann", world.cid, "in 1 minute", "Water the plants")
    world.model.add(text_step("Plants!"))
    world.clock.advance(minutes=31)
    await world.firer("h1").tick()
    await world.runtime.settle(10)
    (asked,) = world.model.requests
    assert "It fires 30 minutes late." in asked.messages[-1].text


@pytest.mark.parametrize("mode", ["reminder", "prompt"])
async def test_a_schedule_whose_conversation_is_gone_is_dropped(world: World, mode: str) -> None:
    made = await world.schedules.create(
        "ann",
        "no-such-conversation",
        "in 1 minute",
        "x",
        mode=mode,  # type: ignore[arg-type]
    )
    world.clock.advance(minutes=1)
    await world.firer("h1").tick()
    assert await world.schedules.store.schedule(made.id) is None
