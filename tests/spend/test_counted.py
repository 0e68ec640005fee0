"""A call that is only counted (no limit set anywhere): what it is charged to is made
once per payer, model and day (``SpendGate.counted``), and made again on a new day or
after a reload; a call that is checked still reserves its own estimate every time. The
SQL stores' usage row of a call, made field by field for speed, names every column and
counts as ``UsageRow.plus`` does (the memory store's rule)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ostinato.messages import Message, TextBlock
from ostinato.models.base import ModelRequest, Usage
from ostinato.spend import gate as gate_module
from ostinato.spend.gate import Payer, SpendGate
from ostinato.spend.limits import Budgets
from ostinato.spend.rule import Allow, Limit
from ostinato.store.base import utcnow
from ostinato.store.memory import MemoryStore
from ostinato.store.spend import Charge, UsageRow
from ostinato.store.sql.spend_sql import _usage_params
from ostinato.store.sql.tables import usage_days

REQUEST = ModelRequest(system="s", messages=(Message("user", (TextBlock("hi"),)),))
ANN = Payer("ann", "lead")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 4, 23, 59, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


async def test_a_counted_call_is_charged_to_the_same_accounts_until_the_day_turns() -> None:
    clock = Clock()
    gate = SpendGate(MemoryStore(), Budgets(), clock=clock)
    assert not gate.checks
    first = gate.counted(ANN, "test:m")
    assert first is gate.counted(ANN, "test:m")  # the same payer, model and day
    assert first.day == "2026-12-04" and first.hold is None
    assert first.accounts == (("owner", "ann"), ("deployment", ""))
    assert gate.counted(Payer("bob", "lead"), "test:m").accounts[0] == ("owner", "bob")
    assert gate.counted(ANN, "test:other") is not first
    clock.now += timedelta(minutes=2)  # past midnight: the new day's
    later = gate.counted(ANN, "test:m")
    assert later is not first and later.day == "2026-12-05"
    cleared = await gate.clear("test:m", REQUEST, ask=False, who=ANN)  # a side call's way
    assert isinstance(cleared.verdict, Allow) and cleared.held is later


async def test_a_reload_that_sets_a_limit_makes_every_call_checked() -> None:
    store = MemoryStore()
    gate = SpendGate(store, Budgets())
    counted = gate.counted(ANN, "test:m")
    gate.budgets = Budgets(default=Limit(hard=5.0))
    assert gate.checks
    cleared = await gate.clear("test:m", REQUEST, ask=False, who=ANN)
    assert isinstance(cleared.verdict, Allow)
    assert cleared.held is not None and cleared.held.hold is not None  # reserved
    assert len(await store.spend_holds()) == 1
    await gate.charge(cleared.held, Usage(10, 2))
    assert await store.spend_holds() == []
    gate.budgets = Budgets()  # the limit taken away again: counted, made anew
    assert not gate.checks
    assert gate.counted(ANN, "test:m") is not counted


def test_a_calls_usage_row_names_every_column_and_counts_as_usage_row_plus() -> None:
    for cost in (None, 0.25):
        charge = Charge("ann", "2026-12-04", "test:m", "lead", (("owner", "ann"),), cost, 7, 3)
        params = _usage_params(charge)
        assert set(params) == {c.name for c in usage_days.columns}
        row = UsageRow(charge.owner, charge.day, charge.model, charge.agent).plus(charge)
        assert params == {name: getattr(row, name) for name in params}
    assert (params["calls"], params["cost_usd"], params["unpriced_calls"]) == (1, 0.25, 0)


def test_with_the_real_clock_the_day_is_read_again_once_it_has_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``today`` reads the clock once a day (a monotonic deadline, midnight UTC): the day
    it gives is the clock's, until the deadline passes; then the clock is read again."""
    read: list[object] = []
    monkeypatch.setattr(gate_module, "utcnow", lambda: read.append(1) or utcnow())
    gate = SpendGate(MemoryStore(), Budgets(), clock=gate_module.utcnow)  # the real one
    assert gate.today() == utcnow().date().isoformat() and len(read) == 1
    assert gate.today() == gate.today() and len(read) == 1  # remembered until midnight
    ticks = gate_module.monotonic() + 2 * 86_400  # two days on
    monkeypatch.setattr(gate_module, "monotonic", lambda: ticks)
    assert gate.today() == utcnow().date().isoformat() and len(read) == 2
