"""Admission control (``ostinato.admission``): a bound on the turns one process carries,
new messages waiting in order for a slot, a 503 with ``Retry-After`` past the queue or
the wait (nothing stored), after-turn work shed while every slot is taken, and the
event loop's lag in ``/healthz``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from ostinato.admission import Admission, Held, LoopLag, Overloaded
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.base import Store
from ostinato.store.memory import MemoryStore
from tests.server.people import GatedModel, client_for, eventually, sse_turn


async def test_waiters_get_slots_in_the_order_they_came() -> None:
    admission = Admission(limit=1, wait=60)
    first = await admission.enter()
    order: list[str] = []

    async def wait(name: str) -> None:
        release = await admission.enter()
        order.append(name)
        release()

    waiters = [asyncio.ensure_future(wait(n)) for n in ("a", "b", "c")]
    await eventually(lambda: _true(admission.waiting == 3))
    assert admission.busy() and order == []
    first()
    first()  # a second release gives nothing back
    await asyncio.gather(*waiters)
    assert order == ["a", "b", "c"]
    assert admission.running == 0 and admission.waiting == 0 and not admission.busy()


async def test_a_full_queue_or_an_ended_wait_is_overloaded() -> None:
    admission = Admission(limit=1, wait=0.01, queue=1)
    held = await admission.enter()
    waiter = asyncio.ensure_future(admission.enter())
    await eventually(lambda: _true(admission.waiting == 1))
    with pytest.raises(Overloaded) as full:
        await admission.enter()
    assert full.value.retry_after == 0.01 and full.value.status == 503
    with pytest.raises(Overloaded):
        await waiter  # its wait ran out
    assert admission.waiting == 0 and admission.running == 1
    held()
    assert admission.running == 0


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    admission = Admission(limit=1, wait=60)
    held = await admission.enter()
    waiter = asyncio.ensure_future(admission.enter())
    await eventually(lambda: _true(admission.waiting == 1))
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert admission.waiting == 0
    held()
    assert admission.running == 0


def test_a_held_slot_is_given_back_once_unless_handed_on() -> None:
    given: list[str] = []
    held = Held(lambda: given.append("a"))
    held.release()
    held.release()
    assert given == ["a"]
    passed = Held(lambda: given.append("b"))
    release = passed.hand()
    passed.release()  # handed on: nothing given back here
    assert given == ["a"] and release is not None
    assert Held().hand() is None


async def _busy_count(runtime: Runtime, *conversations: str) -> int:
    return sum(runtime.busy(c) for c in conversations)


async def test_a_queued_message_runs_within_its_worker_slot_not_beside_the_bound() -> None:
    """The audit's case: limit 2; a message queued behind a running turn, then that turn
    ends and the queued one runs. Before, the queued turn ran with no slot, so a third
    conversation got the freed one: three turns ran under a bound of two."""
    gated = GatedModel()
    runtime = Runtime(MemoryStore(), model=gated, seed_recall=False)
    runtime.admission = Admission(limit=2, wait=60, queue=10)
    try:
        a, b, c = [(await runtime.create_conversation()).id for _ in range(3)]
        await runtime.submit(a, "a1")
        await eventually(lambda: _true(gated.calls == 1))
        queued = await runtime.submit(a, "a2")
        assert queued.queued is not None and runtime.admission.running == 1
        await runtime.submit(b, "b1")
        await eventually(lambda: _true(gated.calls == 2))
        gated.open(1)  # a1 ends; a2 begins in a's worker, on a's slot
        await eventually(lambda: _true(gated.calls == 3))
        third = asyncio.ensure_future(runtime.submit(c, "c1"))
        await eventually(lambda: _true(runtime.admission.waiting == 1))
        assert runtime.admission.running == 2
        assert await _busy_count(runtime, a, b, c) == 2
        gated.open(2)  # b1 ends, b's worker winds down: c's message gets its slot
        await third
        await eventually(lambda: _true(gated.calls == 4))
        assert runtime.admission.running == 2
    finally:
        gated.open_all()
        await runtime.close()
    assert runtime.admission.running == 0


async def test_card_answers_and_decisions_take_a_slot_too() -> None:
    """A card's answer waits for a slot like a message (nothing stored before it has
    one); a decision's continuation is stored already: it waits as long as it takes."""
    gated = GatedModel()
    runtime = Runtime(MemoryStore(), model=gated, seed_recall=False)
    runtime.admission = Admission(limit=1, wait=0.05, queue=10)
    try:
        a = (await runtime.create_conversation()).id
        await runtime.submit(a, "a1")
        await eventually(lambda: _true(gated.calls == 1))
        assert runtime.admission.busy()
        b = (await runtime.create_conversation()).id
        with pytest.raises(Overloaded):
            await runtime.answer_card(b, "toolu_none", {"choice": "x"})
        assert runtime.admission.running == 1 and runtime.admission.waiting == 0
    finally:
        gated.open_all()
        await runtime.close()
    assert runtime.admission.running == 0


def test_loop_lag_keeps_the_latest_and_the_peak() -> None:
    lag = LoopLag()
    lag.note(0.2)
    lag.note(-0.01)  # a timer is never early: counted as no lag
    assert lag.last == 0.0
    assert lag.take_max() == 0.2
    assert lag.take_max() == 0.0


@pytest.fixture
async def gated_app(store: Store) -> AsyncIterator[tuple[Runtime, GatedModel, httpx.AsyncClient]]:
    gated = GatedModel()
    runtime = Runtime(store, model=gated)
    runtime.admission = Admission(limit=1, wait=60, queue=0)
    async with client_for(create_app(runtime, store_name="test")) as client:
        yield runtime, gated, client
    gated.open_all()
    await runtime.close()


async def test_past_the_bound_a_new_message_is_a_503_and_is_not_stored(
    gated_app: tuple[Runtime, GatedModel, httpx.AsyncClient],
) -> None:
    runtime, gated, client = gated_app
    one = (await client.post("/v1/conversations")).json()["id"]
    two = (await client.post("/v1/conversations")).json()["id"]
    running = asyncio.ensure_future(
        client.post(f"/v1/conversations/{one}/turns", json={"text": "a"})
    )
    await eventually(lambda: _true(gated.calls == 1))
    refused = await client.post(f"/v1/conversations/{two}/turns", json={"text": "b"})
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "overloaded"
    assert int(refused.headers["retry-after"]) >= 1
    assert (await runtime.store.list_messages(two)) == []
    health = (await client.get("/healthz")).json()
    assert health["load"]["turns_running"] == 1
    gated.open(1)
    assert (await running).status_code == 200
    await eventually(lambda: _true(runtime.admission.running == 0))
    gated.open(2)
    again = await client.post(f"/v1/conversations/{two}/turns", json={"text": "b"})
    assert again.status_code == 200


async def test_after_turn_work_is_shed_while_every_slot_is_taken() -> None:
    ran: list[str] = []

    async def after_turn(**kw: Any) -> None:
        ran.append(kw["turn_id"])

    gated = GatedModel()
    runtime = Runtime(MemoryStore(), model=gated, after_turn=after_turn, seed_recall=False)
    busy = {"now": False}
    runtime.admission.busy = lambda: busy["now"]  # type: ignore[method-assign]
    try:
        conversation = await runtime.create_conversation()
        for call, shed in ((1, True), (2, False)):
            handle = await (await runtime.submit(conversation.id, f"turn {call}")).handle()
            busy["now"] = shed  # the turn has its slot; the check is at its end
            gated.open(call)
            await handle.task
            await _settle()
            busy["now"] = False
        assert len(ran) == 1  # the second turn's only
    finally:
        gated.open_all()
        await runtime.close()


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def _true(value: bool) -> bool:
    return value


@pytest.fixture
async def waiting_app(store: Store) -> AsyncIterator[tuple[Runtime, GatedModel, Any]]:
    gated = GatedModel()
    runtime = Runtime(store, model=gated, seed_recall=False)
    runtime.admission = Admission(limit=1, wait=60, queue=10)
    app = create_app(runtime, store_name="test")
    yield runtime, gated, app
    gated.open_all()
    await runtime.close()


async def _one_running(runtime: Runtime, gated: GatedModel) -> tuple[str, str]:
    one = (await runtime.create_conversation()).id
    two = (await runtime.create_conversation()).id
    await runtime.submit(one, "a")
    await eventually(lambda: _true(gated.calls == 1))
    return one, two


async def test_a_stream_that_waits_for_a_slot_says_so_then_runs_its_turn(
    waiting_app: tuple[Runtime, GatedModel, Any],
) -> None:
    runtime, gated, app = waiting_app
    _, two = await _one_running(runtime, gated)
    async with sse_turn(app, two, {"text": "b", "client_message_id": "m-b"}) as stream:
        assert stream.status == 200
        first = await stream.next_frame()
        assert first.event == "input.waiting"
        assert (first.data["position"], first.data["wait_s"]) == (1, 60)
        assert first.data["client_message_id"] == "m-b"
        assert runtime.admission.waiting == 1
        assert await runtime.store.list_messages(two) == []  # nothing stored while it waits
        gated.open_all()  # the running turn ends: its slot goes to this message
        frames = await stream.frames_until("turn.finished", within=10)
    kinds = [f.event for f in frames]
    assert kinds[0] == "turn.started" and frames[-1].data["stop_reason"] == "end_turn"
    rows = await runtime.store.list_messages(two)
    assert [r.role for r in rows] == ["user", "assistant"]


async def test_a_stream_whose_wait_runs_out_ends_overloaded_and_stores_nothing(
    waiting_app: tuple[Runtime, GatedModel, Any],
) -> None:
    runtime, gated, app = waiting_app
    runtime.admission.wait = 0.05
    _, two = await _one_running(runtime, gated)
    async with sse_turn(app, two, {"text": "b"}) as stream:
        assert (await stream.next_frame()).event == "input.waiting"
        error = await stream.next_frame(within=10)
        assert error.event == "error" and error.data["code"] == "overloaded"
        with pytest.raises(EOFError):
            await stream.next_frame(within=10)
    assert await runtime.store.list_messages(two) == []
    assert runtime.admission.waiting == 0


async def test_a_client_gone_while_its_message_waits_takes_the_message_with_it(
    waiting_app: tuple[Runtime, GatedModel, Any],
) -> None:
    runtime, gated, app = waiting_app
    one, two = await _one_running(runtime, gated)
    async with sse_turn(app, two, {"text": "b"}) as stream:
        assert (await stream.next_frame()).event == "input.waiting"
    await eventually(lambda: _true(runtime.admission.waiting == 0))
    gated.open_all()
    await eventually(lambda: _true(not runtime.busy(one)))
    await _settle()
    assert await runtime.store.list_messages(two) == []
    assert gated.calls == 1 and runtime.admission.running == 0
