"""A turn on the plain ``LocalBus`` makes no frame nobody hears (``TurnRecord.heard``):
a subscriber, or a relay to other processes, still gets every frame a recording bus
(which is always taken to hear) gets; with neither, nothing is published."""

from __future__ import annotations

from typing import Any

from ostinato.agents import AgentConfig
from ostinato.bus import LocalBus
from ostinato.frames import Frame
from ostinato.models.scripted import ScriptedModel, Step, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.store.memory import MemoryStore
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry

from .harness import CheckingBus


async def noop(i: int) -> int:
    """Return its argument."""
    return i


def _steps() -> list[Step]:
    return [tool_step(("noop", {"i": 1}, "call_1")), tool_step(("noop", {"i": 2}, "call_2")),
            text_step("done")]  # fmt: skip


class Relay:
    def __init__(self) -> None:
        self.sent: list[Frame] = []

    def send(self, conversation_id: str, frame: Frame) -> None:
        self.sent.append(frame)

    def command(self, kind: str, conversation_id: str, data: dict[str, Any]) -> None: ...

    async def watched_elsewhere(self, conversation_id: str) -> bool:
        return False

    async def aclose(self) -> None: ...


async def _turn(store: MemoryStore, bus: LocalBus, subscribe: bool) -> list[Frame]:
    runtime = Runtime(
        store,
        model=ScriptedModel(),
        tools=ToolRegistry([function_tool(noop)]),
        agent=AgentConfig(),
        bus=bus,
    )
    cid = (await runtime.create_conversation()).id
    subscription = bus.subscribe(cid) if subscribe else None
    result = await runtime.run_turn(cid, "go", model=ScriptedModel(_steps()))
    assert result.stop_reason == "end_turn"
    frames: list[Frame] = []
    while subscription is not None and (frame := subscription.take()) is not None:
        frames.append(frame)
    return frames


def _shape(frames: list[Frame]) -> list[tuple[str, int]]:
    return [(f.type, f.seq) for f in frames]


async def test_a_subscriber_gets_every_frame_a_recording_bus_gets() -> None:
    store = MemoryStore()
    recording = CheckingBus(store)
    await _turn(store, recording, subscribe=False)
    heard = await _turn(MemoryStore(), LocalBus(), subscribe=True)
    assert "tool.started" in recording.types() and "tool.finished" in recording.types()
    assert _shape(heard) == _shape(recording.frames)


async def test_a_relay_gets_every_frame_with_no_subscriber_here() -> None:
    store = MemoryStore()
    recording = CheckingBus(store)
    await _turn(store, recording, subscribe=False)
    bus, relay = LocalBus(), Relay()
    bus.relay = relay
    await _turn(MemoryStore(), bus, subscribe=False)
    assert _shape(relay.sent) == _shape(recording.frames)


def test_listened_follows_subscribers_and_the_relay() -> None:
    bus = LocalBus()
    assert not bus.listened("c")
    subscription = bus.subscribe("c")
    assert bus.listened("c") and not bus.listened("d")
    subscription.close()
    assert not bus.listened("c")
    bus.relay = Relay()
    assert bus.listened("d")
