"""A turn's calls on its tab (``loop.spending``): a checked turn reserves for several calls
at once and draws each call's estimate from it, reserves call by call where a block
does not fit, and a reload mid-turn is met before the next call (a counted tab is
charged before the first reservation; new limits are reserved against anew). Between
turns the tab is parked (``spend.parking``): the tests stop the server (``stop``) to
have it charged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ostinato.models.scripted import text_step, tool_step
from ostinato.spend.gate import SpendGate
from ostinato.spend.limits import Budgets
from ostinato.spend.rule import Account, Limit
from ostinato.store.base import WriteOp, utcnow
from ostinato.store.spend import CloseTab
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry
from tests.loop.harness import Harness
from tests.loop.test_spending import harness, priced, spent_before

__all__ = ["priced"]  # the price of the scripted model, for every test here

STEPS = 9  # tool steps before the answer: 10 calls a turn (the agent's most)


def tools_that(act: Any = None) -> ToolRegistry:
    async def step(n: int) -> str:
        """One step (each call names its own ``n``: the same call again is a loop)."""
        if act is not None:
            act()
        return "ok"

    return ToolRegistry([function_tool(step)])


def steps(count: int = STEPS) -> list[object]:
    return [*(tool_step(("step", {"n": n})) for n in range(count)), text_step("done")]


def spy(h: Harness) -> list[str]:
    """What the turn asked of the store, in order: ``reserve`` (a reservation, a
    transaction of its own) and ``close`` (a write charging a tab)."""
    seen: list[str] = []
    reserve, write = h.store.reserve_spend, h.store.write

    async def reserving(*args: Any) -> Any:
        seen.append("reserve")
        return await reserve(*args)

    async def writing(*ops: WriteOp) -> Any:
        if any(isinstance(op, CloseTab) for op in ops):
            seen.append("close")
        return await write(*ops)

    h.store.reserve_spend = reserving  # type: ignore[method-assign]
    h.store.write = writing  # type: ignore[method-assign]
    return seen


async def stop(h: Harness) -> None:
    """The server stops: the tab its turns left parked is charged."""
    gate = h.runtime.spend
    assert isinstance(gate, SpendGate)
    await gate.parking.close_all()


async def settled(h: Harness, limit: Limit) -> tuple[float, float, int, float]:
    """The owner's standing today (spent, reserved) and their usage (calls, cost)."""
    (standing,) = await h.store.spend_standings((Account("owner", "", limit),), utcnow())
    day = utcnow().date().isoformat()
    (row,) = await h.store.usage_rows("", day, day)
    assert await h.store.spend_holds() == []
    return standing.spent, standing.reserved, row.calls, row.cost_usd


async def test_a_checked_turn_reserves_for_several_calls_at_once() -> None:
    limit = Limit(soft=4.0, hard=5.0)
    h = harness(Budgets(default=limit), *steps(), tools=tools_that())
    seen = spy(h)
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "hello")).stop_reason == "end_turn"
    await stop(h)
    assert len(h.model.requests) == STEPS + 1
    reservations = seen.count("reserve")
    # each block is eight calls at the estimate of the call that reserved it; the later
    # calls' histories are longer, so a block covers fewer of them, never one alone
    assert 2 <= reservations <= 4 and seen[-1] == "close"
    spent, reserved, calls, cost = await settled(h, limit)
    assert (reserved, calls) == (0.0, STEPS + 1) and spent == pytest.approx(cost)


async def test_where_a_block_does_not_fit_each_call_reserves_for_itself() -> None:
    """Spent so near the soft limit that eight calls would pass it, not one: each call
    reserves alone, as every call did before tabs, and nobody is asked."""
    limit = Limit(soft=0.05, hard=5.0)
    h = harness(Budgets(default=limit), *steps(2), tools=tools_that())
    await spent_before(h, 0.05 - 0.004)  # a call here costs at most about $0.0015
    seen = spy(h)
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "hello")).stop_reason == "end_turn"
    await stop(h)
    assert seen == ["reserve", "reserve", "reserve", "close"]
    spent, reserved, calls, cost = await settled(h, limit)  # with what was spent before
    assert (reserved, calls) == (0.0, 3 + 1) and spent == pytest.approx(cost) and cost > 0.046


async def test_a_reload_that_sets_a_limit_charges_the_counted_calls_as_it_reserves() -> None:
    """The turn began only counted: its first reservation charges what its tab counted
    first, so the standing it is checked against holds the turn's calls so far."""
    gates: list[SpendGate] = []
    limit = Limit(hard=5.0)

    def reload() -> None:
        gates[0].budgets = Budgets(default=limit)

    h = harness(Budgets(), *steps(1), tools=tools_that(reload))
    assert h.runtime.spend is not None
    gates.append(h.runtime.spend)
    seen = spy(h)
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "hello")).stop_reason == "end_turn"
    await stop(h)
    assert seen == ["reserve", "close"]
    spent, reserved, calls, cost = await settled(h, limit)
    assert (reserved, calls) == (0.0, 2) and spent == pytest.approx(cost)


async def test_a_reload_that_changes_the_limits_makes_the_next_call_reserve_anew() -> None:
    """A block reserved under the old limits is not drawn from under the new ones."""
    gates: list[SpendGate] = []
    limit = Limit(hard=5.0)

    def reload() -> None:
        gates[0].budgets = Budgets(default=Limit(hard=4.0))

    h = harness(Budgets(default=limit), *steps(2), tools=tools_that(reload))
    assert h.runtime.spend is not None
    gates.append(h.runtime.spend)
    seen = spy(h)
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "hello")).stop_reason == "end_turn"
    await stop(h)
    assert seen == ["reserve", "reserve", "reserve", "close"]
    spent, reserved, calls, cost = await settled(h, limit)
    assert (reserved, calls) == (0.0, 3) and spent == pytest.approx(cost)


async def test_a_turn_stopped_by_the_hard_limit_charges_what_it_made() -> None:
    """Calls reserved one by one near the hard limit (a call's estimate here is about
    $0.002 and grows with the history), then one that would pass it: the turn ends
    ``spend_limit`` and its tab, with every call it made, is charged."""
    limit = Limit(hard=0.02)
    h = harness(Budgets(default=limit), *steps(), tools=tools_that())
    await spent_before(h, 0.017)
    seen = spy(h)
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "hello")).stop_reason == "spend_limit"
    await stop(h)
    made = len(h.model.requests)
    assert 1 < made < STEPS + 1 and seen == ["reserve"] * (made + 1) + ["close"]
    spent, reserved, calls, cost = await settled(h, limit)
    assert (reserved, calls) == (0.0, made + 1) and spent == pytest.approx(cost) and spent < 0.02


@pytest.mark.parametrize("limit", [Limit(hard=5.0), None], ids=["limited", "counted"])
async def test_a_turn_across_midnight_charges_each_call_to_its_own_day(
    limit: Limit | None,
) -> None:
    """The clock passes midnight between two calls: the tab of the first day is charged
    before the next call is counted, and each day has its own call."""
    now = [datetime(2026, 12, 4, 23, 59, 30, tzinfo=UTC)]

    def midnight() -> None:
        now[0] += timedelta(minutes=1)

    h = harness(Budgets(default=limit), *steps(1), tools=tools_that(midnight))
    h.runtime.spend = SpendGate(h.store, Budgets(default=limit), clock=lambda: now[0])
    seen = spy(h)
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "hello")).stop_reason == "end_turn"
    await stop(h)
    assert seen.count("close") == 2 and await h.store.spend_holds() == []
    rows = await h.store.usage_rows("", "2026-12-04", "2026-12-05")
    assert [(r.day, r.calls) for r in rows] == [("2026-12-04", 1), ("2026-12-05", 1)]
    own = Account("owner", "", limit or Limit())
    (second,) = await h.store.spend_standings((own,), now[0])  # the new day's alone
    assert second.spent == pytest.approx(rows[1].cost_usd) and second.reserved == 0.0
    (both,) = await h.store.spend_standings((own,), datetime(2026, 12, 4, 12, tzinfo=UTC))
    assert both.spent == pytest.approx(rows[0].cost_usd + rows[1].cost_usd)  # from the 4th
