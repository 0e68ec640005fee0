"""Frames across processes (ostinato.fanout): the wire format, and two runtimes on one
PostgreSQL database, each with its own bus and relay, as two servers would be: a
subscriber on B sees the frames of a turn run on A, rows read from the store, in order,
each once; a frame too large for one NOTIFY arrives whole; a gap makes B's subscribers
replay."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa

from ostinato.approvals import ApprovalPolicy
from ostinato.bus import BacklogOverflow, LocalBus
from ostinato.fanout import Relay, Transport, decode_frame, encode
from ostinato.fanout_pg import LIMIT, PostgresTransport
from ostinato.frames import Frame, MessageCommitted, ToolStarted, TurnFinished
from ostinato.messages import Message, TextBlock
from ostinato.models.base import Model
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.store.sql.postgres import PostgresStore
from ostinato.tools.registry import ToolRegistry
from tests.server.people import GatedModel, deploy_tool
from tests.store.conftest import open_postgres, postgres_url

__all__ = ["postgres_url"]


def test_a_frame_round_trips_and_a_row_travels_as_its_position() -> None:
    frame = ToolStarted(run_id="r1", seq=7, tool_use_id="t1", name="shell", input={"c": "ls é"})
    (payload,) = encode("origin", 5, "conv 1", frame, LIMIT)
    assert payload.startswith("origin 5 0/1 ") and payload.isascii()
    body = payload.split(" ", 3)[3]
    import json

    assert decode_frame(json.loads(body)["f"]) == frame
    row = Message(role="user", blocks=(TextBlock("x" * 50_000),), seq=3)
    (position,) = encode("o", 0, "c", MessageCommitted(run_id="r", seq=3, message=row), LIMIT)
    assert json.loads(position.split(" ", 3)[3]) == {"c": "c", "p": [3, "r", None]}


def test_a_large_frame_is_cut_into_parts_that_fit() -> None:
    frame = ToolStarted(run_id="r", seq=1, tool_use_id="t", name="n", input={"x": "é" * 20_000})
    payloads = encode("o", 10, "c", frame, LIMIT)
    assert len(payloads) > 1
    assert all(len(p.encode()) < 8000 for p in payloads)
    assert [p.split(" ")[1:3] for p in payloads][:2] == [
        ["10", f"0/{len(payloads)}"],
        ["11", f"1/{len(payloads)}"],
    ]
    assert decode_frame({"type": "no.such.frame", "run_id": "", "seq": 0}) is None


class Server:
    """A runtime with its own store connection pool, bus and relay: one server."""

    def __init__(
        self, store: PostgresStore, model: Model, transport: Transport | None = None, **options: Any
    ) -> None:
        self.store = store
        self.runtime = Runtime(store, model=model, bus=LocalBus(), **options)
        self.relay = Relay(transport or PostgresTransport(store.engine.url), store)

    async def start(self) -> Server:
        await self.relay.start(self.runtime.bus)
        return self


def _redis(channel: str) -> Transport:
    url = os.environ.get("OSTINATO_TEST_REDIS_URL")
    if not url:
        pytest.skip("Redis tests need OSTINATO_TEST_REDIS_URL=redis://host:6379/0")
    if importlib.util.find_spec("redis") is None:
        pytest.skip("Redis tests need the redis package: pip install 'ostinato[redis]'")
    from ostinato.fanout_redis import RedisTransport

    return RedisTransport(url, channel=channel)


@pytest.fixture(params=["notify", "redis"])
async def servers(
    request: pytest.FixtureRequest, postgres_url: sa.URL
) -> AsyncIterator[tuple[Server, Server, ScriptedModel]]:
    """Two servers on one database, their frames carried by NOTIFY or by Redis."""
    channel = f"test_{uuid.uuid4().hex[:12]}"
    transports = [_redis(channel), _redis(channel)] if request.param == "redis" else [None, None]
    model = ScriptedModel()
    first = await open_postgres(postgres_url)
    second = await PostgresStore.open(postgres_url)
    a = await Server(first, model, transports[0]).start()
    b = await Server(second, model, transports[1]).start()
    yield a, b, model
    await a.runtime.close()
    await b.runtime.close()


async def _until_finished(subscription: AsyncIterator[Frame]) -> list[Frame]:
    frames: list[Frame] = []
    async with asyncio.timeout(10):
        async for frame in subscription:
            frames.append(frame)
            if isinstance(frame, TurnFinished):
                return frames
    raise AssertionError("the stream ended before turn.finished")


async def test_a_turn_on_one_server_streams_to_a_subscriber_on_another(
    servers: tuple[Server, Server, ScriptedModel],
) -> None:
    a, b, model = servers
    conversation = await a.runtime.create_conversation()
    model.add(tool_step(("calculator", {"expression": "6*7"})), text_step("It is 42.", chunks=4))
    here, there = a.runtime.bus.subscribe(conversation.id), b.runtime.bus.subscribe(conversation.id)
    await a.runtime.run_turn(conversation.id, "what is 6*7?")
    local, remote = await _until_finished(here), await _until_finished(there)
    assert [f.to_json() for f in remote] == [f.to_json() for f in local]
    rows = await b.store.list_messages(conversation.id)
    seen = [f.message for f in remote if isinstance(f, MessageCommitted)]
    assert [m.seq for m in seen] == [m.seq for m in rows]  # every row, once, in order
    assert seen == rows  # read from the store: the same rows
    assert any(f.type == "text.delta" for f in remote)  # live deltas too
    assert b.relay.gaps == 0


async def test_a_frame_larger_than_a_notify_arrives_whole(
    servers: tuple[Server, Server, ScriptedModel],
) -> None:
    a, b, _ = servers
    frame = ToolStarted(run_id="r", seq=0, tool_use_id="t", name="n", input={"x": "ü" * 30_000})
    there = b.runtime.bus.subscribe("c-large")
    a.runtime.bus.publish("c-large", frame)
    assert await there.get(within=10) == frame


async def test_a_lost_payload_makes_the_other_servers_subscribers_replay(
    servers: tuple[Server, Server, ScriptedModel],
) -> None:
    a, b, _ = servers
    frame = ToolStarted(run_id="r", seq=0, tool_use_id="t", name="n", input={})
    there = b.runtime.bus.subscribe("c-gap")
    a.runtime.bus.publish("c-gap", frame)
    assert await there.get(within=10) == frame
    a.relay._counter += 1  # as if a send had failed: one payload never arrives
    a.runtime.bus.publish("c-gap", frame)
    with pytest.raises(BacklogOverflow):
        await there.get(within=10)
    assert b.relay.gaps == 1


@pytest.fixture
async def gated(postgres_url: sa.URL) -> AsyncIterator[tuple[Server, Server, GatedModel]]:
    model = GatedModel()
    first = await open_postgres(postgres_url)
    second = await PostgresStore.open(postgres_url)
    a, b = await Server(first, model).start(), await Server(second, model).start()
    yield a, b, model
    model.open_all()
    await a.runtime.close()
    await b.runtime.close()


async def test_a_cancel_posted_to_one_server_stops_the_turn_running_on_another(
    gated: tuple[Server, Server, GatedModel],
) -> None:
    a, b, _ = gated
    conversation = await a.runtime.create_conversation()
    handle = await a.runtime.start_turn(conversation.id, "go on for ever")
    outcome = await b.runtime.cancel(conversation.id)  # b runs nothing of it
    assert outcome.cancelled_turn == handle.turn.id
    assert handle.task.done()  # the cancel returned after the teardown on a
    (turn,) = await b.store.list_turns(conversation.id)
    assert turn.status == "finished" and turn.stop_reason == "cancelled"


async def test_an_approval_decided_on_one_server_reaches_the_turn_waiting_on_another(
    postgres_url: sa.URL,
) -> None:
    runs: list[str] = []
    model = ScriptedModel([tool_step(("deploy", {"target": "prod"})), text_step("Deployed.")])
    options: dict[str, Any] = {
        "tools": ToolRegistry([deploy_tool(runs)]),
        "approvals": ApprovalPolicy(timeout=60),
    }
    a = await Server(await open_postgres(postgres_url), model, **options).start()
    b = await Server(await PostgresStore.open(postgres_url), model, **options).start()
    try:
        conversation = await a.runtime.create_conversation()
        there = b.runtime.bus.subscribe(conversation.id)  # the only surface: on b
        handle = await a.runtime.start_turn(conversation.id, "ship it")
        async with asyncio.timeout(10):
            asked = None
            while asked is None:
                frame = await there.get()
                asked = frame if frame.type == "approval.requested" else None
        await b.runtime.decide(conversation.id, asked.approval_id, approve=True)
        result = await asyncio.wait_for(handle.result(), 10)
        assert result.stop_reason == "end_turn" and runs == ["prod"]
        assert (await _until_finished(there))[-1].type == "turn.finished"
    finally:
        await a.runtime.close()
        await b.runtime.close()


async def test_an_approval_with_no_surface_on_any_server_is_unreachable(
    servers: tuple[Server, Server, ScriptedModel],
) -> None:
    a, b, _ = servers
    assert not await a.runtime.bus.watched("c-nobody")
    watching = b.runtime.bus.subscribe("c-somebody")
    assert await a.runtime.bus.watched("c-somebody")
    watching.close()


async def test_a_tool_switched_off_on_one_server_is_off_on_the_other(
    servers: tuple[Server, Server, ScriptedModel],
) -> None:
    a, b, _ = servers
    assert "calculator" not in await b.runtime.switched_off("ann")  # b keeps this
    arrived = {"switches": asyncio.Event(), "resync": asyncio.Event()}
    for kind, event in arrived.items():  # after the switches' own handler (in order)
        b.runtime.bus.on(kind, lambda _c, _d, e=event: _set(e))
    await a.runtime.switch_tool("ann", "calculator", enabled=False)
    await asyncio.wait_for(arrived["switches"].wait(), 10)
    assert "calculator" in await b.runtime.switched_off("ann")  # read again
    b.relay._gap()  # a resync (lost commands) forgets every kept scope
    await asyncio.wait_for(arrived["resync"].wait(), 10)
    assert b.runtime.switches._off == {}


async def _set(event: asyncio.Event) -> None:
    event.set()


async def test_a_dropped_connection_makes_subscribers_replay_and_frames_flow_again(
    postgres_url: sa.URL,
) -> None:
    model = ScriptedModel()
    a = await Server(await open_postgres(postgres_url), model).start()
    b = await Server(await PostgresStore.open(postgres_url), model).start()
    try:
        there = b.runtime.bus.subscribe("c-drop")
        transport = b.relay.transport
        assert isinstance(transport, PostgresTransport)
        pid = transport._connection.get_server_pid()
        async with a.store.engine.connect() as conn:
            await conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        with pytest.raises(BacklogOverflow):  # b's surfaces replay from the store
            await there.get(within=10)
        frame = ToolStarted(run_id="r", seq=0, tool_use_id="t", name="n", input={})
        again = b.runtime.bus.subscribe("c-drop")
        async with asyncio.timeout(10):
            while True:  # b reconnects: a frame published now reaches it
                a.runtime.bus.publish("c-drop", frame)
                with contextlib.suppress(TimeoutError):
                    assert await again.get(within=0.2) == frame
                    break
    finally:
        await a.runtime.close()
        await b.runtime.close()


async def test_a_notify_connection_is_not_handed_its_own_payloads(postgres_url: sa.URL) -> None:
    channel = f"test_{uuid.uuid4().hex[:12]}"
    a, b = (PostgresTransport(postgres_url, channel=channel) for _ in range(2))
    heard_a, heard_b = asyncio.Queue[str](), asyncio.Queue[str]()
    await a.connect(heard_a.put_nowait, lambda _e: None)
    await b.connect(heard_b.put_nowait, lambda _e: None)
    try:
        await a.send(["one", "two"])
        await b.send(["three"])  # sent after a's: reaches a after a's own would have
        async with asyncio.timeout(10):
            assert [await heard_b.get(), await heard_b.get()] == ["one", "two"]
            assert await heard_a.get() == "three"
        assert heard_a.empty() and heard_b.empty()
    finally:
        await a.close()
        await b.close()


class _Wire:
    """A transport that only hands the test the receiving callback."""

    limit: int | None = None

    async def connect(self, received: Any, lost: Any) -> None:
        self.received = received

    async def send(self, payloads: list[str]) -> None:
        pass

    async def close(self) -> None:
        pass


async def test_a_receiver_reads_rows_once_per_conversation_and_skips_the_unwatched() -> None:
    """Payloads that arrive together: the rows of a conversation's positions are read in
    one read, frames of a conversation nobody here watches are not even decoded (the
    broken JSON below would be a gap), and what is delivered keeps its order."""
    from ostinato.store import MemoryStore
    from ostinato.store.base import CreateConversation, append
    from tests.store.test_store_ops import conversation

    store = MemoryStore()
    conv = conversation()
    await store.write(CreateConversation(conv))
    rows = [await append(store, conv.id, Message("user", (TextBlock(str(i)),))) for i in range(3)]
    reads: list[str] = []
    real = store.list_messages

    async def counted(cid: str, **kw: Any) -> list[Message]:
        reads.append(cid)
        return await real(cid, **kw)

    store.list_messages = counted  # type: ignore[method-assign]
    wire, bus = _Wire(), LocalBus()
    relay = Relay(wire, store)
    await relay.start(bus)
    try:
        watching = bus.subscribe(conv.id)
        started = ToolStarted(run_id="r", seq=3, tool_use_id="t", name="n", input={})
        items: list[Frame] = [MessageCommitted(run_id="r", seq=r.seq or 0, message=r) for r in rows]
        bodies = [encode("other", 0, conv.id, item, None)[0].split(" ", 3)[3] for item in items]
        bodies.insert(1, '{"c":"nobody","f":{not json')
        bodies.append(encode("other", 0, conv.id, started, None)[0].split(" ", 3)[3])
        for n, body in enumerate(bodies):
            wire.received(f"other {n} 0/1 {body}")
        got = [await watching.get(within=5) for _ in range(4)]
        assert [f.seq for f in got] == [1, 2, 3, 3] and got[-1] == started
        assert [f.message for f in got[:3] if isinstance(f, MessageCommitted)] == rows
        assert reads == [conv.id] and relay.gaps == 0
    finally:
        await relay.aclose()


async def test_frames_published_a_moment_apart_go_in_one_send(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A frame alone in the outbox waits ``GATHER_S`` for company (a turn publishes a few
    frames after each of its commits): one send, one round trip, for both."""
    from ostinato import fanout
    from ostinato.store import MemoryStore

    monkeypatch.setattr(fanout, "GATHER_S", 0.5)  # a slow machine still gathers both
    sends: list[list[str]] = []
    sent = asyncio.Event()

    class Recorded(_Wire):
        async def send(self, payloads: list[str]) -> None:
            sends.append(payloads)
            sent.set()

    bus = LocalBus()
    relay = Relay(Recorded(), MemoryStore())
    await relay.start(bus)
    try:
        frame = ToolStarted(run_id="r", seq=0, tool_use_id="t", name="n", input={})
        bus.publish("c", frame)
        for _ in range(3):
            await asyncio.sleep(0)  # the send loop has the first, and waits
        bus.publish("c", frame)
        await asyncio.wait_for(sent.wait(), 10)
        assert [len(payloads) for payloads in sends] == [2]
    finally:
        await relay.aclose()
