"""A turn's tab on every engine (``store.spend``, migration 0022): its calls counted on one
row with their replies (``TabSpend``) and read with the usage and the standing at once,
charged when it closes (``CloseTab``), a reservation for several calls added to it, and a
tab left by a dead server charged what it counted and, for the call that may have been
under way, one estimate."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from ostinato.errors import NotFound
from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock
from ostinato.spend.rule import Allow, Refuse, Standing, Verdict
from ostinato.store import Store
from ostinato.store.base import AppendMessage
from ostinato.store.spend import CloseTab, Hold, TabSpend
from tests.store.test_store_ops import new_conversation
from tests.store.test_store_spend import ANN, DAY, EVERYONE, KEYS, NOW, by_rule, charge, spend


def tab(holder: str | None = "s1", *, unit: float | None = 0.0) -> Hold:
    """A turn's tab as the loop makes it: reserving nothing (a counted turn's)."""
    return Hold(new_id(), "ann", DAY, 0.0, KEYS, "openai:gpt-4.1", NOW, "helper", holder, unit)


def reservation(of: Hold, amount: float, unit: float) -> Hold:
    """What a checked turn reserves for its tab: ``amount`` (a block), at ``unit`` a call."""
    return dataclasses.replace(of, amount=amount, unit=unit)


async def standing(store: Store) -> tuple[float, float]:
    """Ann's standing as a reservation is decided on: what was charged, and what is
    reserved, every tab's block in it (read by a reservation that refuses)."""
    seen: list[Standing] = []

    def probe(standings: Sequence[Standing]) -> Verdict:
        seen.extend(standings)
        return Refuse(None, None)

    probing = Hold(new_id(), "ann", DAY, 0.0, KEYS, "openai:gpt-4.1", NOW)
    assert isinstance(await spend(store).reserve_spend(probing, (ANN,), NOW, probe), Refuse)
    return round(seen[0].spent, 9), round(seen[0].reserved, 9)


async def shown(store: Store) -> tuple[float, float]:
    """Ann's standing as a person reads it (``spend_standings``)."""
    (ann,) = await spend(store).spend_standings((ANN,), NOW)
    return round(ann.spent, 9), round(ann.reserved, 9)


async def test_a_tab_counts_its_calls_on_one_row_and_is_charged_when_it_closes(
    store: Store,
) -> None:
    s = spend(store)
    cid = (await new_conversation(store, owner="ann")).id
    counted = tab()
    reply = Message("assistant", (TextBlock("done"),))
    await store.write(AppendMessage(cid, reply), TabSpend(counted, charge(0.1), 0.0, opens=True))
    await store.write(AppendMessage(cid, reply), TabSpend(counted, charge(None), 0.0))
    await store.write(AppendMessage(cid, reply), TabSpend(counted, charge(0.2), 0.0))
    (row,) = await s.spend_holds()
    assert (row.id, row.amount, row.calls, row.unpriced_calls) == (counted.id, 0.0, 3, 1)
    assert (row.tokens_in, row.tokens_out, round(row.cost, 9)) == (300, 30, 0.3)
    assert await standing(store) == (0.0, 0.0)  # charged when the tab closes
    # read while the tab is open: its calls show as spent and in the usage at once
    assert await shown(store) == (0.3, 0.0)
    (usage,) = await s.usage_rows("ann", DAY, DAY)
    assert (usage.calls, usage.unpriced_calls, usage.tokens_in, usage.tokens_out) == (3, 1, 300, 30)
    await store.write(CloseTab(counted.id))  # charged to the accounts and the usage
    assert await s.spend_holds() == []
    assert await standing(store) == (0.3, 0.0)
    (usage,) = await s.usage_rows("ann", DAY, DAY)
    assert (usage.calls, usage.unpriced_calls, usage.tokens_in, usage.tokens_out) == (3, 1, 300, 30)
    assert usage.cost_usd == pytest.approx(0.3)
    await store.write(CloseTab(counted.id))  # closed already: nothing more
    assert await standing(store) == (0.3, 0.0)


async def test_a_reservation_for_a_tab_charges_what_it_counted_and_reserves_anew(
    store: Store,
) -> None:
    """In one transaction: the tab's calls so far are charged and what it reserved is
    released, then the new reservation is decided on that standing and held."""
    s = spend(store)
    checked = tab(unit=None)
    block = reservation(checked, 0.4, 0.05)
    assert isinstance(await s.reserve_spend(block, (ANN, EVERYONE), NOW, by_rule(0.4)), Allow)
    assert await standing(store) == (0.0, 0.4)
    await store.write(TabSpend(checked, charge(0.01), 0.05))
    await store.write(TabSpend(checked, charge(0.02), 0.08))
    (row,) = await s.spend_holds()
    assert (round(row.drawn, 9), row.calls, row.unit) == (0.13, 2, 0.08)
    assert await standing(store) == (0.0, 0.4)  # reserved until the tab is charged
    # read: the calls at their cost, the block the tab reserved ahead not shown
    assert await shown(store) == (0.03, 0.0)
    more = reservation(checked, 0.3, 0.1)  # a call whose estimate did not fit: anew
    assert isinstance(await s.reserve_spend(more, (ANN, EVERYONE), NOW, by_rule(0.3)), Allow)
    assert await standing(store) == (0.03, 0.3)
    (row,) = await s.spend_holds()
    assert (row.id, row.amount, row.drawn, row.calls, row.unit) == (checked.id, 0.3, 0.0, 0, 0.1)
    await store.write(TabSpend(checked, charge(0.04), 0.1))
    await store.write(CloseTab(checked.id))
    assert await standing(store) == (0.07, 0.0)
    (usage,) = await s.usage_rows("ann", DAY, DAY)
    assert (usage.calls, round(usage.cost_usd, 9), usage.tokens_in) == (3, 0.07, 300)


async def test_a_reservation_refused_still_charges_what_the_tab_counted(store: Store) -> None:
    s = spend(store)
    checked = tab(unit=None)
    await s.reserve_spend(reservation(checked, 0.4, 0.05), (ANN, EVERYONE), NOW, by_rule(0.4))
    await store.write(TabSpend(checked, charge(0.01), 0.05))
    past = reservation(checked, 2.0, 2.0)
    assert not isinstance(await s.reserve_spend(past, (ANN,), NOW, by_rule(2.0)), Allow)
    assert await s.spend_holds() == [] and await standing(store) == (0.01, 0.0)
    await store.write(CloseTab(checked.id))  # the turn's end: nothing more to charge
    assert await standing(store) == (0.01, 0.0)


async def test_a_tab_left_by_a_dead_server_is_charged_what_it_counted_and_one_estimate(
    store: Store,
) -> None:
    """A call may have been under way when the server died: one more call is charged at
    the largest estimate the tab's calls had, at most what was left of its reservation."""
    s = spend(store)
    checked = tab("dead", unit=None)
    await s.reserve_spend(reservation(checked, 0.4, 0.05), (ANN, EVERYONE), NOW, by_rule(0.4))
    await store.write(TabSpend(checked, charge(0.01), 0.05))
    await store.write(TabSpend(checked, charge(0.03), 0.07))  # a larger estimate: the unit
    assert await s.charge_hold(checked.id)
    assert await standing(store) == (0.11, 0.0)  # 0.01 + 0.03 + 0.07
    (usage,) = await s.usage_rows("ann", DAY, DAY)
    assert (usage.calls, round(usage.cost_usd, 9)) == (3, 0.11)
    assert await s.spend_holds() == []
    await store.write(CloseTab(checked.id))  # the turn's own close, late: nothing more
    assert await standing(store) == (0.11, 0.0)


async def test_a_dead_servers_tab_is_charged_at_most_what_was_left_of_its_reservation(
    store: Store,
) -> None:
    s = spend(store)
    checked = tab("dead", unit=None)
    await s.reserve_spend(reservation(checked, 0.1, 0.05), (ANN, EVERYONE), NOW, by_rule(0.1))
    await store.write(TabSpend(checked, charge(0.02), 0.05))
    await store.write(TabSpend(checked, charge(0.02), 0.04))
    assert await s.charge_hold(checked.id)
    assert await standing(store) == (0.05, 0.0)  # 0.02 + 0.02 + what was left, 0.01


async def test_a_counted_tab_left_by_a_dead_server_is_charged_only_what_it_counted(
    store: Store,
) -> None:
    """A counted turn reserved nothing: no call of it is charged that it did not count."""
    s = spend(store)
    counted = tab("dead")
    await store.write(TabSpend(counted, charge(0.1), 0.0))
    assert await s.charge_hold(counted.id)
    assert await standing(store) == (0.1, 0.0)
    (usage,) = await s.usage_rows("ann", DAY, DAY)
    assert usage.calls == 1


async def test_a_call_counted_with_a_write_that_fails_is_not_counted(store: Store) -> None:
    s = spend(store)
    counted = tab()
    await store.write(TabSpend(counted, charge(0.1), 0.0))
    reply = Message("assistant", (TextBlock("done"),))
    with pytest.raises(NotFound):  # the row's conversation is unknown: nothing is written
        await store.write(AppendMessage("nowhere", reply), TabSpend(counted, charge(0.2), 0.5))
    with pytest.raises(NotFound):  # the first call of a tab, in a write that fails
        await store.write(AppendMessage("nowhere", reply), TabSpend(tab(), charge(0.2), 0.0))
    (row,) = await s.spend_holds()
    assert (row.calls, round(row.cost, 9), row.drawn, row.unit) == (1, 0.1, 0.0, 0.0)
    with pytest.raises(NotFound):  # a close in a write that fails leaves the tab open
        await store.write(AppendMessage("nowhere", reply), CloseTab(counted.id))
    assert [h.id for h in await s.spend_holds()] == [counted.id]
    assert await standing(store) == (0.0, 0.0)
    assert await shown(store) == (0.1, 0.0)  # the one call the open tab counted


async def test_a_call_on_a_tab_recovery_took_makes_the_tab_again(store: Store) -> None:
    """A server judged gone that goes on (its lease lapsed): recovery charged its tab;
    the turn's next call makes the row again, reserving nothing, and is charged once."""
    s = spend(store)
    counted = tab()
    await store.write(TabSpend(counted, charge(0.1), 0.0, opens=True))
    assert await s.charge_hold(counted.id)
    await store.write(TabSpend(counted, charge(0.2), 0.0))  # on PostgreSQL: redone, found
    (row,) = await s.spend_holds()
    assert (row.id, row.amount, row.calls, round(row.cost, 9)) == (counted.id, 0.0, 1, 0.2)
    await store.write(CloseTab(counted.id))
    assert await standing(store) == (0.3, 0.0)
