"""``SpendStore`` on every engine: reservations against budgets, settling (alone, and as a
write op with a step's row), holds charged after a crash, usage per owner, and
reservations racing on one account."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from ostinato.errors import NotFound
from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock
from ostinato.spend.rule import Account, Allow, Limit, Refuse, Standing, Verdict, decide
from ostinato.store import Store
from ostinato.store.base import AppendMessage
from ostinato.store.spend import Charge, Hold, SettleSpend, SpendStore
from tests.store.test_store_ops import new_conversation

NOW = datetime(2026, 12, 3, 15, 0, tzinfo=UTC)
DAY = "2026-12-03"
ANN = Account("owner", "ann", Limit(soft=0.5, hard=1.0))
EVERYONE = Account("deployment", "", Limit())
KEYS = (("owner", "ann"), ("deployment", ""))


def hold(amount: float, holder: str | None = "s1", owner: str = "ann") -> Hold:
    return Hold(new_id(), owner, DAY, amount, KEYS, "openai:gpt-4.1", NOW, "helper", holder)


def charge(cost: float | None, owner: str = "ann", day: str = DAY) -> Charge:
    return Charge(owner, day, "openai:gpt-4.1", "helper", KEYS, cost, 100, 10)


def by_rule(estimate: float) -> object:
    def rule(standings: Sequence[Standing]) -> Verdict:
        return decide(standings, estimate)

    return rule


def spend(store: Store) -> SpendStore:
    assert isinstance(store, SpendStore)
    return store


async def test_a_reservation_is_held_then_replaced_by_the_cost(store: Store) -> None:
    s = spend(store)
    first = hold(0.3)
    assert isinstance(await s.reserve_spend(first, (ANN, EVERYONE), NOW, by_rule(0.3)), Allow)
    ann, everyone = await s.spend_standings((ANN, EVERYONE), NOW)
    assert (ann.spent, ann.reserved, ann.since) == (0.0, 0.3, DAY)
    assert (everyone.spent, everyone.reserved) == (0.0, 0.3)
    (stored,) = await s.spend_holds()
    assert stored == first
    await s.settle_spend(first.id, charge(0.1))
    ann, everyone = await s.spend_standings((ANN, EVERYONE), NOW)
    assert (ann.spent, ann.reserved) == (0.1, 0.0)
    assert everyone.spent == 0.1
    assert await s.spend_holds() == []


async def test_a_call_past_the_hard_limit_reserves_nothing(store: Store) -> None:
    s = spend(store)
    await s.settle_spend(None, charge(0.9))
    verdict = await s.reserve_spend(hold(0.2), (ANN, EVERYONE), NOW, by_rule(0.2))
    assert isinstance(verdict, Refuse) and verdict.standing is not None
    assert verdict.standing.account == ANN and verdict.standing.spent == pytest.approx(0.9)
    assert await s.spend_holds() == []
    (ann,) = await s.spend_standings((ANN,), NOW)
    assert ann.reserved == 0.0


async def test_a_month_counts_its_days_and_a_day_only_its_own(store: Store) -> None:
    s = spend(store)
    await s.settle_spend(None, charge(0.25, day="2026-11-30"))
    await s.settle_spend(None, charge(0.5, day="2026-12-01"))
    await s.settle_spend(None, charge(0.125, day=DAY))
    month = Account("owner", "ann", Limit(hard=10, period="month"))
    (daily,) = await s.spend_standings((ANN,), NOW)
    (monthly,) = await s.spend_standings((month,), NOW)
    assert daily.spent == 0.125 and daily.since == DAY
    assert monthly.spent == 0.625 and monthly.since == "2026-12-01"


async def test_a_hold_left_by_a_dead_server_is_charged_at_its_estimate(store: Store) -> None:
    s = spend(store)
    left = hold(0.4, holder="dead")
    await s.reserve_spend(left, (ANN, EVERYONE), NOW, by_rule(0.4))
    assert await s.charge_hold(left.id)
    assert not await s.charge_hold(left.id)  # once
    (ann,) = await s.spend_standings((ANN,), NOW)
    assert (ann.spent, ann.reserved) == (0.4, 0.0)
    await s.settle_spend(left.id, charge(0.1))  # the call's own settling comes too late
    (ann,) = await s.spend_standings((ANN,), NOW)
    assert ann.spent == 0.4
    (row,) = await s.usage_rows("ann", DAY, DAY)
    assert (row.calls, row.cost_usd) == (1, 0.4)


async def test_usage_is_kept_by_owner_day_model_and_agent(store: Store) -> None:
    s = spend(store)
    await s.settle_spend(None, charge(0.1))
    await s.settle_spend(None, charge(0.2))
    await s.settle_spend(None, charge(None))  # no price
    await s.settle_spend(None, charge(0.5, owner="bob"))
    (ann,) = await s.usage_rows("ann", DAY, DAY)
    assert (ann.calls, ann.tokens_in, ann.tokens_out, ann.unpriced_calls) == (3, 300, 30, 1)
    assert ann.cost_usd == pytest.approx(0.3)
    assert (ann.model, ann.agent) == ("openai:gpt-4.1", "helper")
    everyone = await s.usage_rows(None, DAY, DAY)
    assert [r.owner for r in everyone] == ["ann", "bob"]
    assert await s.usage_rows("ann", "2026-12-04", "2026-12-31") == []
    assert await s.usage_rows("nobody\x00", DAY, DAY) == []


async def test_racing_reservations_never_pass_the_hard_limit(store: Store) -> None:
    """Forty calls of 0.1 reserved at once against a hard limit of 1.0: ten get through."""
    s = spend(store)
    hard = Account("owner", "ann", Limit(hard=1.0))
    results = await asyncio.gather(
        *(s.reserve_spend(hold(0.1), (hard, EVERYONE), NOW, by_rule(0.1)) for _ in range(40))
    )
    assert sum(isinstance(v, Allow) for v in results) == 10
    (ann,) = await s.spend_standings((hard,), NOW)
    assert ann.reserved == pytest.approx(1.0)


async def test_a_settlement_commits_with_the_write_it_is_part_of(store: Store) -> None:
    """``SettleSpend`` in a ``write`` (a step's reply row): the hold is released and the
    cost charged in that write's transaction, and a write that fails charges nothing."""
    s = spend(store)
    cid = (await new_conversation(store, owner="ann")).id
    first = hold(0.3)
    await s.reserve_spend(first, (ANN, EVERYONE), NOW, by_rule(0.3))
    reply = Message("assistant", (TextBlock("done"),))
    with pytest.raises(NotFound):  # the row's conversation is unknown: nothing is written
        await store.write(AppendMessage("nowhere", reply), SettleSpend(first.id, charge(0.1)))
    (ann,) = await s.spend_standings((ANN,), NOW)
    assert (ann.spent, ann.reserved) == (0.0, 0.3)
    assert await s.spend_holds() == [first] and await s.usage_rows("ann", DAY, DAY) == []
    await store.write(AppendMessage(cid, reply), SettleSpend(first.id, charge(0.1)))
    ann, everyone = await s.spend_standings((ANN, EVERYONE), NOW)
    assert (ann.spent, ann.reserved) == (0.1, 0.0)
    assert (everyone.spent, everyone.reserved) == (0.1, 0.0)
    assert await s.spend_holds() == []
    # counted only (no hold: on PostgreSQL planned as one statement), at no known price
    await store.write(AppendMessage(cid, reply), SettleSpend(None, charge(None)))
    (row,) = await s.usage_rows("ann", DAY, DAY)
    assert (row.calls, row.unpriced_calls, row.tokens_in) == (2, 1, 200)
    assert row.cost_usd == pytest.approx(0.1)
    assert [m.text for m in await store.list_messages(cid)] == ["done", "done"]


async def test_a_settlement_after_recovery_charged_the_hold_charges_nothing(store: Store) -> None:
    s = spend(store)
    left = hold(0.4, holder="dead")
    await s.reserve_spend(left, (ANN, EVERYONE), NOW, by_rule(0.4))
    assert await s.charge_hold(left.id)
    await store.write(SettleSpend(left.id, charge(0.1)))
    (ann,) = await s.spend_standings((ANN,), NOW)
    assert (ann.spent, ann.reserved) == (0.4, 0.0)
    (row,) = await s.usage_rows("ann", DAY, DAY)
    assert (row.calls, row.cost_usd) == (1, 0.4)
