"""A turn's tab kept between turns (``spend.parking``): the next turn of the same payer,
model and day goes on with it, its reservations grow, and it is charged when it has
been idle, when a reload changes the budgets, when the server stops, and at once when
its turn agreed to pass a soft limit."""

from __future__ import annotations

import asyncio
from typing import Any

from ostinato.models.scripted import text_step
from ostinato.spend.gate import SpendGate
from ostinato.spend.limits import Budgets
from ostinato.spend.parking import Parked, Parking
from ostinato.spend.rule import Limit
from ostinato.store.base import utcnow
from ostinato.store.spend import Hold
from tests.loop.harness import Harness
from tests.loop.test_spending import harness, priced, requested, spent_before
from tests.spend.test_tab import spy, steps, stop, tools_that

__all__ = ["priced"]  # the price of the scripted model, for every test here


def gate_of(h: Harness) -> SpendGate:
    gate = h.runtime.spend
    assert isinstance(gate, SpendGate)
    return gate


async def test_a_persons_turns_go_on_with_one_tab_and_reserve_rarely() -> None:
    """Three turns of ten calls each: one tab for all of them, never closed between
    them, and each reservation is for a larger block than the one before (8, 16, 32
    calls...), so 30 calls reserve a few times, not once a turn or more."""
    limit = Limit(soft=4.0, hard=5.0)
    h = harness(Budgets(default=limit), *steps(), *steps(), *steps(), tools=tools_that())
    seen = spy(h)
    reserved: list[float] = []
    reserve = h.store.reserve_spend

    async def amounts(hold: Hold, *args: Any) -> Any:
        verdict = await reserve(hold, *args)
        reserved.append(hold.amount / (hold.unit or 1.0))  # calls' worth it reserved
        return verdict

    h.store.reserve_spend = amounts  # type: ignore[method-assign]
    cid = await h.conversation()
    for text in ("one", "two", "three"):
        assert (await h.runtime.run_turn(cid, text)).stop_reason == "end_turn"
    assert "close" not in seen and 1 <= seen.count("reserve") <= 4
    assert [round(n) for n in reserved] == [8 << i for i in range(len(reserved))]
    (tab,) = await h.store.spend_holds()  # counting the calls since it last reserved
    day = utcnow().date().isoformat()
    (row,) = await h.store.usage_rows("", day, day)
    assert 0 < tab.calls < row.calls == 30
    await stop(h)
    assert seen[-1] == "close" and await h.store.spend_holds() == []


async def test_a_tab_left_idle_is_charged() -> None:
    h = harness(Budgets(default=Limit(hard=5.0)), text_step("done"))
    gate = gate_of(h)
    gate.parking.idle = 0.05
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "hello")).stop_reason == "end_turn"
    assert len(gate.parking) == 1
    for _ in range(100):
        await asyncio.sleep(0.02)
        if not await h.store.spend_holds():
            break
    assert len(gate.parking) == 0 and await h.store.spend_holds() == []
    day = utcnow().date().isoformat()
    (row,) = await h.store.usage_rows("", day, day)
    assert row.calls == 1 and row.cost_usd > 0


async def test_a_reload_charges_the_tabs_parked_under_the_old_budgets() -> None:
    h = harness(Budgets(default=Limit(hard=5.0)), text_step("one"), text_step("two"))
    gate = gate_of(h)
    seen = spy(h)
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "hello")).stop_reason == "end_turn"
    gate.budgets = Budgets(default=Limit(hard=4.0))
    await asyncio.gather(*gate.parking._closing)
    assert seen == ["reserve", "close"] and await h.store.spend_holds() == []
    assert (await h.runtime.run_turn(cid, "again")).stop_reason == "end_turn"
    assert seen == ["reserve", "close", "reserve"]  # a new tab, under the new budgets


async def test_another_payers_or_models_turn_does_not_take_the_tab() -> None:
    h = harness(Budgets(default=Limit(hard=5.0)), text_step("one"), text_step("two"))
    seen = spy(h)
    gate = gate_of(h)
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "hello")).stop_reason == "end_turn"
    (parked,) = await h.store.spend_holds()
    other = (await h.runtime.create_conversation(owner="bob")).id
    h.bus.frames.clear()  # the harness' bus checks one conversation's frames at a time
    assert (await h.runtime.run_turn(other, "hello")).stop_reason == "end_turn"
    assert seen == ["reserve", "reserve"] and len(gate.parking) == 2
    assert parked.id in {tab.id for tab in await h.store.spend_holds()}


async def test_a_turn_that_agreed_to_pass_a_soft_limit_closes_its_tab() -> None:
    """What it reserved under the agreement is not lent to a turn that did not agree."""
    h = harness(Budgets(default=Limit(soft=0.01, hard=1.0)), text_step("one"))
    await spent_before(h, 0.0099)
    seen = spy(h)
    cid = await h.conversation()
    watcher = h.bus.subscribe(cid)
    task = asyncio.ensure_future(h.runtime.run_turn(cid, "hello"))
    frame = await asyncio.wait_for(requested(watcher), 2)
    await h.runtime.decide(cid, frame.approval_id, approve=True)
    assert (await asyncio.wait_for(task, 5)).stop_reason == "end_turn"
    assert seen == ["reserve", "reserve", "close"] and len(gate_of(h).parking) == 0
    assert await h.store.spend_holds() == []


async def test_the_runtime_closing_charges_the_parked_tabs() -> None:
    h = harness(Budgets(), text_step("done"))
    seen = spy(h)
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "hello")).stop_reason == "end_turn"
    assert seen == [] and len(await h.store.spend_holds()) == 1
    await h.runtime.close()
    assert seen == ["close"]
    assert not h.store._spend_holds  # read directly: the store is closed


async def test_a_tab_that_ends_after_the_parking_shut_is_closed() -> None:
    closed: list[tuple[str, ...]] = []

    async def close(ids: tuple[str, ...]) -> None:
        closed.append(ids)

    parking = Parking(close)
    tab = Hold("t1", "ann", "2026-12-05", 0.0, (("owner", "ann"),), "m", utcnow(), "a")
    assert parking.park(Parked(tab, 0.0, None, 0)) is None
    again = Hold("t2", "ann", "2026-12-05", 0.0, (("owner", "ann"),), "m", utcnow(), "a")
    assert parking.park(Parked(again, 0.0, None, 0)) is tab  # displaced: to close
    await parking.close_all()
    assert closed == [("t2",)] and len(parking) == 0
    assert parking.park(Parked(tab, 0.0, None, 0)) is tab
