"""The poller with a controllable clock: a reminder (no model call) delivered once at its
time; a prompt fired in two stages (a background turn in its own conversation, muted,
then a normal turn in the conversation whose trigger is hidden); a process killed at
each kill point taken over after its lease without doubling; a stage one that stops
without an answer tried again; missed slots fired once, saying how late."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ostinato.background.firer import MARKER, Firer
from ostinato.background.schedules import Schedules
from ostinato.background.stage_one import conversation_id
from ostinato.config.background import BackgroundSection
from ostinato.errors import QuotaExhausted
from ostinato.frames import Frame, MessageCommitted, TurnStarted
from ostinato.models.scripted import ScriptedModel, error_step, text_step
from ostinato.runtime import Runtime
from ostinato.store import open_store
from ostinato.store.base import Store
from ostinato.store.memory import MemoryStore
from ostinato.store.schedules import Schedule

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

    async def settled(self) -> None:
        """Wait for the turn running in the conversation (stage two), if one is."""
        handle = self.runtime.running(self.cid)
        if handle is not None:
            await handle.result()

    async def stored(self, schedule_id: str) -> Schedule:
        found = await self.schedules.store.schedule(schedule_id)
        assert found is not None
        return found


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


async def marked(world: World, schedule_id: str, cid: str | None = None) -> list[str]:
    rows = await world.runtime.store.list_messages(cid or world.cid, include_hidden=True)
    return [r.role for r in rows if str(r.metadata.get(MARKER, "")).startswith(schedule_id)]


def drain(frames: list[Frame], subscription: object) -> list[Frame]:
    queue = subscription._queue  # type: ignore[attr-defined]
    while not queue.empty():
        frame = queue.get_nowait()
        if frame is not None:
            frames.append(frame)
    return frames


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
    stored = await world.stored(made.id)
    assert isinstance(frame, MessageCommitted) and frame.run_id.startswith("sch_")
    assert frame.background_run_id == frame.run_id == stored.run_id
    assert frame.message.text == "Call the bank"
    assert (stored.state, stored.fired, stored.next_fire) == ("delivered", 1, None)
    assert await world.schedules.list("ann") == []  # delivered ones leave the list
    world.clock.advance(hours=1)
    assert await firer.tick() == []
    assert world.model.requests == []  # no model call


async def test_a_prompt_runs_in_the_background_then_a_turn_delivers_it(world: World) -> None:
    made = await world.schedules.create("ann", world.cid, "in 1 minute", "Plan my day")
    world.model.add(text_step("Plan: rest, then the bank."), text_step("Here is your plan!"))
    watching = world.runtime.bus.subscribe(world.cid)
    world.clock.advance(minutes=1)
    await world.firer("h1").tick()
    await world.settled()
    shown = await world.runtime.store.list_messages(world.cid, include_hidden=False)
    assert [(r.role, r.text) for r in shown] == [("assistant", "Here is your plan!")]
    assert await marked(world, made.id) == ["user"]  # the hidden row stage two answers
    background = conversation_id(await world.stored(made.id))
    assert await marked(world, made.id, background) == ["user"]  # stage one's attempt
    one, two = world.model.requests
    assert "Plan my day" in one.messages[-1].text and "nobody reads" in one.messages[-1].text
    assert "Plan: rest, then the bank." in two.messages[-1].text  # the result, handed on
    stored = await world.stored(made.id)
    assert (stored.state, stored.result) == ("delivered", "Plan: rest, then the bank.")
    (stage_one,) = await world.runtime.store.list_turns(background)
    assert stored.run_id == stage_one.run_id
    frames = drain([], watching)
    assert all(f.run_id != stage_one.run_id for f in frames)  # stage one is muted here
    (started,) = [f for f in frames if isinstance(f, TurnStarted)]
    assert (started.kind, started.background_run_id) == ("background", stage_one.run_id)
    listed = await world.runtime.store.get_conversation(background)
    assert listed is not None and listed.owner == "ann"


@pytest.mark.parametrize("step", ["started", "ran", "handed"])
async def test_a_prompt_killed_at_a_step_is_taken_over_once(world: World, step: str) -> None:
    made = await world.schedules.create("ann", world.cid, "in 1 minute", "Plan my day")
    world.model.add(text_step("Plan: rest."), text_step("Your plan: rest."))
    world.clock.advance(minutes=1)
    with pytest.raises(Killed):
        await world.firer("dies", kill_at=step).tick()
    assert await world.firer("other").tick() == []  # still held: its lease has not run out
    world.clock.advance(seconds=SETTINGS.lease_seconds)
    await world.settled()  # a stage two handed on before the kill
    (taken,) = await world.firer("other").tick()
    assert taken.state == ("claimed" if step == "started" else "ran")
    await world.settled()
    assert await marked(world, made.id) == ["user"]  # handed on once
    background = conversation_id(taken)
    assert await marked(world, made.id, background) == ["user"]  # stage one ran once
    assert len(world.model.requests) == 2
    shown = await world.runtime.store.list_messages(world.cid, include_hidden=False)
    assert [r.text for r in shown] == ["Your plan: rest."]
    assert (await world.stored(made.id)).state == "delivered"


@pytest.mark.parametrize("step", ["ran", "handed"])
async def test_a_reminder_killed_at_a_step_is_taken_over_once(world: World, step: str) -> None:
    made = await world.schedules.create("ann", world.cid, "in 1 minute", "Stretch", mode="reminder")
    world.clock.advance(minutes=1)
    with pytest.raises(Killed):
        await world.firer("dies", kill_at=step).tick()
    world.clock.advance(seconds=SETTINGS.lease_seconds)
    (taken,) = await world.firer("other").tick()
    assert taken.state == "ran"
    assert await marked(world, made.id) == ["assistant"]  # once, not twice
    stored = await world.stored(made.id)
    assert (stored.state, stored.fired) == ("delivered", 1)


async def test_a_stage_one_that_stops_without_an_answer_is_tried_again(world: World) -> None:
    made = await world.schedules.create("ann", world.cid, "in 1 minute", "Plan my day")
    broken = QuotaExhausted("out of credit")
    world.model.add(error_step(broken), text_step("Plan: rest."), text_step("Rest today."))
    world.clock.advance(minutes=1)
    await world.firer("h1").tick()
    await world.settled()
    stored = await world.stored(made.id)
    assert (stored.state, stored.attempts, stored.result) == ("delivered", 2, "Plan: rest.")
    background = conversation_id(stored)
    assert await marked(world, made.id, background) == ["user", "user"]
    retry = world.model.requests[1].messages[-1].text
    assert "An earlier attempt stopped" in retry
    shown = await world.runtime.store.list_messages(world.cid, include_hidden=False)
    assert [r.text for r in shown] == ["Rest today."]


async def test_a_reply_cut_off_is_asked_for_again_once(world: World) -> None:
    made = await world.schedules.create("ann", world.cid, "in 1 minute", "Plan my day")
    broken = QuotaExhausted("out of credit")
    world.model.add(text_step("Plan: rest."), error_step(broken), text_step("Rest today."))
    world.clock.advance(minutes=1)
    await world.firer("h1").tick()
    assert await marked(world, made.id) == ["user", "user"]
    again = world.model.requests[2].messages[-1].text
    assert "was cut off" in again and "Plan: rest." in again
    shown = await world.runtime.store.list_messages(world.cid, include_hidden=False)
    assert [r.text for r in shown if r.role == "assistant"][-1] == "Rest today."
    assert (await world.stored(made.id)).state == "delivered"


async def test_missed_slots_fire_once_and_say_how_late(world: World) -> None:
    made = await world.schedules.create(
        "ann", world.cid, "every 15m", "Drink water", mode="reminder"
    )
    world.clock.advance(hours=2)  # every server was down for eight slots
    (fired,) = await world.firer("h1").tick()
    assert fired.id == made.id
    assert await world.firer("h1").tick() == []
    assert await marked(world, made.id) == ["assistant"]
    stored = await world.stored(made.id)
    assert stored.state == "due" and stored.fired == 1
    assert (stored.run_id, stored.result) == (None, None)  # the next slot starts afresh
    assert stored.late_seconds == pytest.approx(105 * 60)
    assert stored.next_fire == world.clock.now + timedelta(minutes=15)
    world.clock.advance(minutes=15)
    await world.firer("h1").tick()
    assert await marked(world, made.id) == ["assistant", "assistant"]


async def test_a_recurring_prompt_runs_each_slot_afresh(world: World) -> None:
    made = await world.schedules.create("ann", world.cid, "every 1h", "News?")
    world.model.add(*(text_step(t) for t in ("quiet", "Quiet today.", "busy", "Busy now.")))
    for _ in range(2):
        world.clock.advance(hours=1)
        await world.firer("h1").tick()
        await world.settled()
    shown = await world.runtime.store.list_messages(world.cid, include_hidden=False)
    assert [r.text for r in shown] == ["Quiet today.", "Busy now."]
    background = conversation_id(await world.stored(made.id))
    assert len(await world.runtime.store.list_turns(background)) == 2


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
    world.model.add(text_step("Water them."), text_step("Plants!"))
    world.clock.advance(minutes=31)
    await world.firer("h1").tick()
    await world.settled()
    one, two = world.model.requests
    assert "It runs 30 minutes late." in one.messages[-1].text
    assert "It fired 30 minutes late." in two.messages[-1].text


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
