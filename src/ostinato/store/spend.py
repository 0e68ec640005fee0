"""Spend in the store: what each budget account has spent and reserved per UTC day, the
reservations of calls under way, and each owner's usage by day, model and agent.

Three tables, each with an ``owner`` column (``""`` for the shared pools, and for
calls of no owner), so an owner's rows are found, and erased, by it:

- ``spend_days``: per account (``pool``, ``owner``) and day, the cost settled
  (``spent_usd``) and the estimates of calls under way (``reserved_usd``);
- ``spend_holds``: one row per call or turn under way: what it reserved, on which
  accounts, for which model and agent, and the lease of the server making it
  (``holder``); a turn's row is its **tab** (0022), which also counts its calls;
- ``usage_days``: per owner, day, model and agent: calls, tokens and cost (the priced
  calls' sum, and how many calls had no price).

``reserve_spend`` is one transaction: it locks the accounts' rows for the day (so
reservations of one account on every server take turns), reads each account's
standing over its period, asks ``decide`` (``spend.rule``), and writes the hold only
when the verdict is ``Allow``. ``settle_spend`` replaces a call's hold by its actual
cost. A hold with a ``unit`` is a turn's tab: its calls are counted on its row as they
reply (``TabSpend``, a write op in the transaction that commits the reply's row, so a
step pays for no transaction of its own to count what it cost) and charged when it
closes (``CloseTab``: once no turn has taken it for a while, ``spend.parking``); a
reservation for a tab first charges what it has counted and releases what it reserved,
in the same transaction, so the standing it decides on holds the turn's calls at their
cost. A hold whose server died is charged by ``charge_hold`` (recovery), never
forgotten: a call may have been under way (``owed``). Like leases, these are written
apart from ``Store.write``, each method one small transaction, apart from the write ops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from ostinato.spend.rule import Account, Allow, Pool, Standing, Verdict, start

AccountKey = tuple[Pool, str]  # (pool, owner)
Decide = Callable[[Sequence[Standing]], Verdict]


# ``Hold``, ``Charge``, ``UsageRow`` and ``SettleSpend`` are made once a model call, so
# they are not frozen: a frozen dataclass sets each field through ``object.__setattr__``,
# several times the cost of a plain one's ``__init__`` (issue 29's per-step figures).
# None of them is changed once made.


@dataclass(slots=True)
class Hold:
    """A call under way: its estimate, reserved on ``accounts`` on ``day``."""

    id: str
    owner: str
    day: str
    amount: float
    accounts: tuple[AccountKey, ...]
    model: str
    created_at: datetime
    agent: str = ""
    holder: str | None = None
    # A turn's tab (``TabSpend``): ``unit`` is None for one call's hold; for a tab, the
    # largest estimate its calls had. ``drawn``: the estimates of its calls counted so
    # far; the rest is what those calls used, charged when the tab closes.
    unit: float | None = None
    drawn: float = 0.0
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float = 0.0
    unpriced_calls: int = 0


@dataclass(slots=True)
class Charge:
    """One call's cost as it ended, charged to ``accounts`` and to ``owner``'s usage.
    ``cost`` is ``None`` when its model has no price."""

    owner: str
    day: str
    model: str
    agent: str
    accounts: tuple[AccountKey, ...]
    cost: float | None
    tokens_in: int = 0
    tokens_out: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(slots=True)
class UsageRow:
    owner: str
    day: str
    model: str
    agent: str
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0  # the priced calls' cost
    unpriced_calls: int = 0  # calls whose model had no price: their cost is unknown

    def plus(self, charge: Charge) -> UsageRow:
        return UsageRow(  # made directly: this runs once a model call
            self.owner,
            self.day,
            self.model,
            self.agent,
            self.calls + 1,
            self.tokens_in + charge.tokens_in,
            self.tokens_out + charge.tokens_out,
            self.cache_read_tokens + charge.cache_read_tokens,
            self.cache_write_tokens + charge.cache_write_tokens,
            self.cost_usd + (charge.cost or 0.0),
            self.unpriced_calls + (charge.cost is None),
        )


@dataclass(slots=True)
class SettleSpend:
    """A write op: ``settle_spend`` inside a ``Store.write`` (with the reply's row)."""

    hold_id: str | None
    charge: Charge


@dataclass(slots=True)
class TabSpend:
    """A write op: one call of a turn added to the turn's tab (``hold``; the first
    call's op makes its row), with the reply's row. ``drawn``: the call's estimate,
    taken from what the tab reserved (0 when it reserved nothing)."""

    hold: Hold
    charge: Charge
    drawn: float
    opens: bool = False  # the tab's first call: its row is made (else it is there)


@dataclass(slots=True)
class CloseTab:
    """A write op: a turn's tab charged to its accounts and its owner's usage, and what
    it reserved released (the turn has ended: no call of it is under way)."""

    hold_id: str


SpendOp = SettleSpend | TabSpend | CloseTab


def owed(hold: Hold, in_flight: bool) -> UsageRow:
    """What a hold is charged when it is dropped: the calls its tab counted and, when a
    call may have been under way (``in_flight``: its server died), one more at its
    estimate: a call's hold at its amount; a tab at its largest estimate, at most what
    is left of its reservation (nothing when none is left: no call could be under way)."""
    row = UsageRow(hold.owner, hold.day, hold.model, hold.agent, hold.calls, hold.tokens_in)
    row.tokens_out, row.cost_usd = hold.tokens_out, hold.cost
    row.cache_read_tokens, row.cache_write_tokens = hold.cache_read_tokens, hold.cache_write_tokens
    row.unpriced_calls = hold.unpriced_calls
    if in_flight:
        left = hold.amount - hold.drawn
        extra = hold.amount if hold.unit is None else min(hold.unit, max(0.0, left))
        if hold.unit is None or extra > 0:
            row.calls, row.cost_usd = row.calls + 1, row.cost_usd + extra
    return row


def with_tabs(
    rows: Sequence[UsageRow], holds: Sequence[Hold], owner: str | None, since: str, until: str
) -> list[UsageRow]:
    """``rows`` (usage as charged) with what the open tabs among ``holds`` counted and
    have not been charged yet: a running turn's calls, and those of a tab parked between
    turns (``spend.parking``). By day, owner, model and agent, as ``usage_rows`` is."""
    found = {(r.owner, r.day, r.model, r.agent): r for r in rows}
    for hold in holds:
        if hold.unit is None or not hold.calls or not since <= hold.day <= until:
            continue
        if owner is not None and hold.owner != owner:
            continue
        row = owed(hold, False)
        key = (row.owner, row.day, row.model, row.agent)
        before = found.get(key)
        found[key] = row if before is None else _summed(before, row)
    return sorted(found.values(), key=lambda r: (r.day, r.owner, r.model, r.agent))


def standing_with_tabs(standing: Standing, holds: Sequence[Hold]) -> Standing:
    """``standing`` as a person reads it: the calls the open tabs counted in what was
    spent, and what the tabs reserved ahead of their calls not in what is reserved (it is
    not spending: each of their calls is in what was spent once it has replied; the
    calls under way that ``reserved`` shows are those reserved one by one)."""
    account, spent, reserved = standing.account, standing.spent, standing.reserved
    key = (account.pool, account.owner)
    for hold in holds:
        if hold.unit is not None and hold.day >= standing.since and key in hold.accounts:
            spent += hold.cost
            reserved -= hold.amount
    return Standing(account, round(spent, 9), max(0.0, round(reserved, 9)), standing.since)


def tab_charge(hold: Hold, charge: Charge, drawn: float) -> None:
    """``charge`` (one call) added to the tab ``hold`` as ``TabSpend`` adds it."""
    hold.calls += 1
    hold.tokens_in += charge.tokens_in
    hold.tokens_out += charge.tokens_out
    hold.cache_read_tokens += charge.cache_read_tokens
    hold.cache_write_tokens += charge.cache_write_tokens
    hold.cost += charge.cost or 0.0
    hold.unpriced_calls += charge.cost is None
    hold.drawn += drawn
    hold.unit = max(hold.unit or 0.0, drawn)


@runtime_checkable
class SpendStore(Protocol):
    """What budgets and usage need from a store (every store here has it)."""

    async def reserve_spend(
        self, hold: Hold, accounts: Sequence[Account], now: datetime, decide: Decide
    ) -> Verdict:
        """In one transaction: the standing of each of ``accounts`` at ``now`` (over
        its period), ``decide`` on them, and ``hold`` reserved on every one of them when
        the verdict is ``Allow``. Returns the verdict. A tab's reservation (``hold.unit``
        set) first charges the tab of that id, if there is one, and releases what it
        reserved: the tab goes on from what this one reserves."""
        ...

    async def settle_spend(self, hold_id: str | None, charge: Charge) -> None:
        """Drop the call's hold (if it had one) and charge its cost to its accounts and
        its owner's usage. A hold that is gone already was charged at its estimate by
        recovery: nothing more is charged."""
        ...

    async def spend_standings(self, accounts: Sequence[Account], now: datetime) -> list[Standing]:
        """Each account's standing as a person reads it (``standing_with_tabs``)."""
        ...

    async def spend_holds(self) -> list[Hold]:
        """Every hold, oldest first."""
        ...

    async def charge_hold(self, hold_id: str) -> bool:
        """Charge a hold at its estimate and drop it; False if it is gone already."""
        ...

    async def usage_rows(self, owner: str | None, since: str, until: str) -> list[UsageRow]:
        """Usage from day ``since`` to ``until`` (ISO dates, both included) of ``owner``,
        or of every owner (None), by day, owner, model and agent; the open tabs' calls
        with it (``with_tabs``)."""
        ...


# --- the in-memory store's ----------------------------------------------------------------


class MemorySpend:
    """``SpendStore`` for ``MemoryStore`` (one process: each method runs whole)."""

    _spend_days: dict[tuple[str, str, str], list[float]]  # (pool, owner, day) -> spent, held
    _spend_holds: dict[str, Hold]
    _usage_days: dict[tuple[str, str, str, str], UsageRow]  # (owner, day, model, agent)

    def _standing(self, account: Account, now: datetime) -> Standing:
        since = start(account.limit.period, now)
        spent = reserved = 0.0
        for (pool, owner, day), (got, held) in self._spend_days.items():
            if pool == account.pool and owner == account.owner and day >= since:
                spent, reserved = spent + got, reserved + held
        return Standing(account, spent, reserved, since)

    async def reserve_spend(
        self, hold: Hold, accounts: Sequence[Account], now: datetime, decide: Decide
    ) -> Verdict:
        tab = self._spend_holds.pop(hold.id, None) if hold.unit is not None else None
        if tab is not None:  # a tab's calls so far charged, its reservation released
            _drop(self, tab, in_flight=False)
        verdict = decide([self._standing(account, now) for account in accounts])
        if isinstance(verdict, Allow):
            for key in hold.accounts:
                _add(self, key, hold.day, 0.0, hold.amount)
            self._spend_holds[hold.id] = _fresh(hold, hold.amount)  # the store's own copy
        return verdict

    async def settle_spend(self, hold_id: str | None, charge: Charge) -> None:
        _settle(self, hold_id, charge, None)

    async def spend_standings(self, accounts: Sequence[Account], now: datetime) -> list[Standing]:
        holds = list(self._spend_holds.values())
        return [standing_with_tabs(self._standing(account, now), holds) for account in accounts]

    async def spend_holds(self) -> list[Hold]:
        return sorted(self._spend_holds.values(), key=lambda h: (h.created_at, h.id))

    async def charge_hold(self, hold_id: str) -> bool:
        hold = self._spend_holds.pop(hold_id, None)
        if hold is None:
            return False
        _drop(self, hold, in_flight=True)
        return True

    async def usage_rows(self, owner: str | None, since: str, until: str) -> list[UsageRow]:
        found = [
            row
            for (who, day, _, _), row in self._usage_days.items()
            if (owner is None or who == owner) and since <= day <= until
        ]
        return with_tabs(found, list(self._spend_holds.values()), owner, since, until)


class SpendTables(Protocol):
    """The in-memory store's spend tables (``MemorySpend``'s, ``MemoryTables``')."""

    _spend_days: dict[tuple[str, str, str], list[float]]
    _spend_holds: dict[str, Hold]
    _usage_days: dict[tuple[str, str, str, str], UsageRow]


def _add(t: SpendTables, key: AccountKey, day: str, spent: float, held: float) -> None:
    row = t._spend_days.setdefault((key[0], key[1], day), [0.0, 0.0])
    row[0] += spent
    row[1] += held


def _count(t: SpendTables, charge: Charge, key: tuple[str, str, str, str] | None = None) -> None:
    """``charge`` added to its usage row (``key``, when the caller has it made)."""
    key = key or (charge.owner, charge.day, charge.model, charge.agent)
    row = t._usage_days.get(key) or UsageRow(*key)
    t._usage_days[key] = row.plus(charge)


def _settle(
    t: SpendTables, hold_id: str | None, charge: Charge, usage: tuple[str, str, str, str] | None
) -> None:
    if hold_id is not None:
        hold = t._spend_holds.pop(hold_id, None)
        if hold is None:
            return  # recovery charged it at its estimate
        for key in hold.accounts:
            _add(t, key, hold.day, 0.0, -hold.amount)
    cost = charge.cost or 0.0
    for key in charge.accounts:
        _add(t, key, charge.day, cost, 0.0)
    _count(t, charge, usage)


def settle_write(t: SpendTables, op: SettleSpend, undo: list[Callable[[], None]]) -> None:
    """``SettleSpend`` in a memory ``write``: settled, with how to take it back."""
    charge = op.charge
    hold = t._spend_holds.get(op.hold_id) if op.hold_id is not None else None
    if op.hold_id is not None and hold is None:
        return  # recovery charged it at its estimate: nothing to do, nothing to undo
    usage = (charge.owner, charge.day, charge.model, charge.agent)
    row = t._usage_days.get(usage)

    def unsettle() -> None:
        for key in charge.accounts:
            _add(t, key, charge.day, -(charge.cost or 0.0), 0.0)
        if hold is not None:
            for key in hold.accounts:
                _add(t, key, hold.day, 0.0, hold.amount)
            t._spend_holds[hold.id] = hold
        if row is None:
            t._usage_days.pop(usage, None)
        else:
            t._usage_days[usage] = row

    undo.append(unsettle)
    _settle(t, op.hold_id, charge, usage)


def _fresh(hold: Hold, amount: float) -> Hold:
    """A new row for ``hold``: what it reserved (``amount``), nothing counted yet."""
    return Hold(
        hold.id, hold.owner, hold.day, amount, hold.accounts, hold.model, hold.created_at,
        hold.agent, hold.holder, hold.unit,
    )  # fmt: skip


def _drop(t: SpendTables, hold: Hold, *, in_flight: bool) -> None:
    """A hold taken out: what it owes (``owed``) charged, what it reserved released."""
    row = owed(hold, in_flight)
    for account in hold.accounts:
        _add(t, account, hold.day, row.cost_usd, -hold.amount)
    if row.calls:
        key = (row.owner, row.day, row.model, row.agent)
        before = t._usage_days.get(key)
        t._usage_days[key] = row if before is None else _summed(before, row)


def _summed(a: UsageRow, b: UsageRow) -> UsageRow:
    return UsageRow(
        a.owner, a.day, a.model, a.agent, a.calls + b.calls, a.tokens_in + b.tokens_in,
        a.tokens_out + b.tokens_out, a.cache_read_tokens + b.cache_read_tokens,
        a.cache_write_tokens + b.cache_write_tokens, a.cost_usd + b.cost_usd,
        a.unpriced_calls + b.unpriced_calls,
    )  # fmt: skip


def tab_write(t: SpendTables, op: TabSpend, undo: list[Callable[[], None]]) -> None:
    """``TabSpend`` in a memory ``write``: the call counted on its turn's tab."""
    tab_id = op.hold.id
    hold = t._spend_holds.get(tab_id)
    if hold is None:  # the turn's first counted call (or recovery took the tab: anew)
        hold = t._spend_holds[tab_id] = _fresh(op.hold, 0.0)
        undo.append(lambda: _forget(t, tab_id))
    else:

        def untab(hold: Hold = hold, unit: float | None = hold.unit) -> None:
            charge = op.charge
            hold.calls -= 1
            hold.tokens_in -= charge.tokens_in
            hold.tokens_out -= charge.tokens_out
            hold.cache_read_tokens -= charge.cache_read_tokens
            hold.cache_write_tokens -= charge.cache_write_tokens
            hold.cost -= charge.cost or 0.0
            hold.unpriced_calls -= charge.cost is None
            hold.drawn -= op.drawn
            hold.unit = unit

        undo.append(untab)
    tab_charge(hold, op.charge, op.drawn)


def _forget(t: SpendTables, hold_id: str) -> None:
    t._spend_holds.pop(hold_id, None)


def close_write(t: SpendTables, op: CloseTab, undo: list[Callable[[], None]]) -> None:
    """``CloseTab`` in a memory ``write``: the tab charged and dropped."""
    hold = t._spend_holds.pop(op.hold_id, None)
    if hold is None:
        return  # recovery charged it already
    key = (hold.owner, hold.day, hold.model, hold.agent)
    before = t._usage_days.get(key)
    owes = owed(hold, False).cost_usd

    def reopen() -> None:
        t._spend_holds[hold.id] = hold
        for account in hold.accounts:
            _add(t, account, hold.day, -owes, hold.amount)
        if before is None:
            t._usage_days.pop(key, None)
        else:
            t._usage_days[key] = before

    undo.append(reopen)
    _drop(t, hold, in_flight=False)
