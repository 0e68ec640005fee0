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

from ostinato.admission import Admission, LoopLag, Overloaded, release_when_ended
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.base import Store
from ostinato.store.memory import MemoryStore
from tests.server.people import GatedModel, client_for, eventually


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


async def test_release_when_ended_waits_for_the_turn_task() -> None:
    released: list[bool] = []
    loop = asyncio.get_running_loop()
    started: asyncio.Future[Any] = loop.create_future()
    gate = asyncio.Event()
    task = asyncio.ensure_future(gate.wait())
    release_when_ended(started, lambda: released.append(True))
    started.set_result(type("Handle", (), {"task": task})())
    await asyncio.sleep(0)
    assert released == []
    gate.set()
    await task
    await asyncio.sleep(0)
    assert released == [True]
    failed: asyncio.Future[Any] = loop.create_future()
    release_when_ended(failed, lambda: released.append(False))
    failed.set_exception(RuntimeError("did not begin"))
    await asyncio.sleep(0)
    assert released == [True, False]


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
