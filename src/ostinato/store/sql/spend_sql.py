"""``SpendStore`` for both SQL engines (``store.spend``): budget accounts per day, the
holds of calls under way, and usage per owner.

Each method is one transaction of its own, apart from the store's write path, as the
leases' are (``sql.leases``: PostgreSQL on a pooled connection, SQLite under ``BEGIN
IMMEDIATE``). On PostgreSQL a reservation first adds nothing to each account's row for
the day (an upsert), which locks that row until the transaction ends: reservations of
one account on every server take turns, and each reads the standing the one before it
left (READ COMMITTED reads anew at each statement). Rows are locked in one order, so two
reservations never wait on each other crosswise. SQLite has one writer at a time (every
process's ``BEGIN IMMEDIATE`` takes the database's write lock), so there it reads at once.

A turn's own calls are counted on its tab inside the writes that commit their reply rows
(``TabSpend``, one ``UPDATE``, ``tab_op``), and the tab is charged when it closes
(``CloseTab``, ``close_op``), both run through the write path's ``Executor`` with the
statements named in ``SpendWriteName``, in the accounts' one order as here. A
reservation for a tab charges what the tab counted first (``reserve_spend``).
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import cache, lru_cache
from typing import Any, Literal, TypeAlias, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ostinato.spend.rule import Account, Allow, Standing, Verdict, start
from ostinato.store.spend import (
    AccountKey,
    Charge,
    CloseTab,
    Decide,
    Hold,
    SettleSpend,
    TabSpend,
    UsageRow,
    owed,
    standing_with_tabs,
    with_tabs,
)
from ostinato.store.sql.leases import LeaseTx
from ostinato.store.sql.rows import Row, TimeDecoder
from ostinato.store.sql.tables import spend_days, spend_holds, usage_days

T = TypeVar("T")
_USAGE_COUNTS = (
    "calls",
    "tokens_in",
    "tokens_out",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
    "unpriced_calls",
)


def _p(table: sa.Table, name: str, param: str | None = None) -> sa.BindParameter[Any]:
    return sa.bindparam(param or name, type_=table.c[name].type)


@cache
def statements(dialect: str) -> dict[str, sa.Executable]:
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    d, h, u = spend_days, spend_holds, usage_days
    add = insert(d).values({c.name: _p(d, c.name) for c in d.columns})
    add = add.on_conflict_do_update(
        index_elements=["pool", "owner", "day"],
        set_={
            "spent_usd": d.c.spent_usd + add.excluded.spent_usd,
            "reserved_usd": d.c.reserved_usd + add.excluded.reserved_usd,
        },
    )
    count = insert(u).values({c.name: _p(u, c.name) for c in u.columns})
    count = count.on_conflict_do_update(
        index_elements=["owner", "day", "model", "agent"],
        set_={name: u.c[name] + count.excluded[name] for name in _USAGE_COUNTS},
    )
    standing = sa.select(
        sa.func.coalesce(sa.func.sum(d.c.spent_usd), 0.0),
        sa.func.coalesce(sa.func.sum(d.c.reserved_usd), 0.0),
    ).where(
        d.c.pool == _p(d, "pool"),
        d.c.owner == _p(d, "owner"),
        d.c.day >= _p(d, "day", "since"),
    )
    hold_id = h.c.id == _p(h, "id", "b_id")
    greatest = sa.func.greatest if dialect == "postgresql" else sa.func.max  # scalar
    # constants in the text: the writers bind nothing at build time
    zero: sa.ColumnClause[float] = sa.literal_column("0.0")
    one: sa.ColumnClause[int] = sa.literal_column("1")
    tab = (  # a turn's next call on its tab (``tab_op``)
        sa.update(h)
        .where(hold_id)
        .values(
            {name: h.c[name] + _p(h, name) for name in ("drawn_usd", *_USAGE_COUNTS)}
            | {"calls": h.c.calls + one}
            | {"unit_usd": greatest(sa.func.coalesce(h.c.unit_usd, zero), _p(h, "drawn_usd"))}
        )
    )
    return {
        "add": add,
        "count": count,
        "standing": standing,
        "insert_hold": sa.insert(h).values({c.name: _p(h, c.name) for c in h.columns}),
        "tab": tab,
        "open_tab": sa.insert(h).values({c.name: _p(h, c.name) for c in h.columns}),
        "take_hold": sa.delete(h).where(hold_id).returning(*h.columns),
    }


SpendWriteName: TypeAlias = Literal[
    "spend_add", "spend_count", "spend_take_hold", "spend_tab", "spend_open_tab"
]


def spend_write_statements(dialect: str) -> dict[str, sa.Executable]:
    """The statements the spend ops run in a write, by ``SpendWriteName``."""
    found = statements(dialect)
    return {
        "spend_add": found["add"],
        "spend_count": found["count"],
        "spend_take_hold": found["take_hold"],
        "spend_tab": found["tab"],
        "spend_open_tab": found["open_tab"],
    }


def settle_op(ex: Any, op: SettleSpend) -> None:
    """``SettleSpend`` on ``ex`` (an ``ops.Executor``): ``SQLSpend.settle_spend``'s work
    inside the caller's write."""
    charge, cost = op.charge, op.charge.cost or 0.0
    changes = {(pool, owner, charge.day): [cost, 0.0] for pool, owner in charge.accounts}
    if op.hold_id is not None:
        found = ex.rows("spend_take_hold", {"b_id": op.hold_id})
        if not found:
            return  # recovery charged it at its estimate
        hold = _hold(found[0], ex.read_time)
        for pool, owner in hold.accounts:  # one statement an account: charged, released
            changes.setdefault((pool, owner, hold.day), [0.0, 0.0])[1] -= hold.amount
    for (pool, owner, day), (spent, held) in sorted(changes.items()):
        params = {"pool": pool, "owner": owner, "day": day}
        ex.execute("spend_add", params | {"spent_usd": spent, "reserved_usd": held})
    ex.execute("spend_count", _usage_params(charge))


def tab_op(ex: Any, op: TabSpend, now: Any = None) -> None:
    """``TabSpend`` on ``ex``: the call's counts added to its turn's tab, one statement;
    the tab's first call (``opens``), or one whose tab recovery took, makes the row,
    reserving nothing. (``now``: unused; the op table calls this directly.)"""
    hold, charge = op.hold, op.charge
    cost = charge.cost
    counts = {  # made directly: this runs once a model call
        "b_id": hold.id,
        "drawn_usd": op.drawn,
        "tokens_in": charge.tokens_in,
        "tokens_out": charge.tokens_out,
        "cache_read_tokens": charge.cache_read_tokens,
        "cache_write_tokens": charge.cache_write_tokens,
        "cost_usd": cost or 0.0,
        "unpriced_calls": int(cost is None),
    }
    if op.opens or not ex.execute("spend_tab", counts):
        del counts["b_id"]
        ex.execute("spend_open_tab", counts | _opened(ex, hold, op.drawn))


def _opened(ex: Any, hold: Hold, unit: float) -> dict[str, Any]:
    """A tab's row as its first call makes it, apart from the call's counts."""
    return {
        "id": hold.id,
        "owner": hold.owner,
        "day": hold.day,
        "amount_usd": 0.0,
        "accounts": _accounts_json(hold.accounts),
        "model": hold.model,
        "agent": hold.agent,
        "holder": hold.holder,
        "created_at": ex.time(hold.created_at),
        "unit_usd": unit,
        "calls": 1,
    }


def close_op(ex: Any, op: CloseTab) -> None:
    """``CloseTab`` on ``ex``: the tab taken out, charged and its reservation released."""
    found = ex.rows("spend_take_hold", {"b_id": op.hold_id})
    if found:  # else recovery charged it
        dropped(ex.execute, ("spend_add", "spend_count"), _hold(found[0], ex.read_time), False)


def dropped(
    execute: Callable[[Any, dict[str, Any]], Any],
    names: tuple[Any, Any],
    hold: Hold,
    in_flight: bool,
) -> None:
    """A hold taken out: what it owes (``store.spend.owed``) charged to its accounts (in
    their one order) and its owner's usage, what it reserved released. ``names``: the
    accounts' and the usage's statements, as ``execute`` takes them."""
    row = owed(hold, in_flight)
    for pool, owner in sorted(hold.accounts):
        params = {"pool": pool, "owner": owner, "day": hold.day}
        execute(names[0], params | {"spent_usd": row.cost_usd, "reserved_usd": -hold.amount})
    if row.calls:
        execute(names[1], {name: getattr(row, name) for name in _USAGE_COLUMNS})


@lru_cache(maxsize=4096)  # an entry per owner (and pool) seen: bounded
def _accounts_json(accounts: tuple[AccountKey, ...]) -> str:
    return json.dumps([list(key) for key in accounts])


def _usage_params(charge: Charge) -> dict[str, Any]:
    """One call's ``usage_days`` row (added to the row of its day, model and agent);
    made directly: this runs once a model call."""
    return {
        "owner": charge.owner,
        "day": charge.day,
        "model": charge.model,
        "agent": charge.agent,
        "calls": 1,
        "tokens_in": charge.tokens_in,
        "tokens_out": charge.tokens_out,
        "cache_read_tokens": charge.cache_read_tokens,
        "cache_write_tokens": charge.cache_write_tokens,
        "cost_usd": charge.cost or 0.0,
        "unpriced_calls": int(charge.cost is None),
    }


_HOLDS = sa.select(spend_holds).order_by(spend_holds.c.created_at, spend_holds.c.id)


@cache
def _usage_of(by_owner: bool) -> sa.Select[Any]:
    u = usage_days
    stmt = (
        sa.select(u)
        .where(u.c.day >= _p(u, "day", "since"), u.c.day <= _p(u, "day", "until"))
        .order_by(u.c.day, u.c.owner, u.c.model, u.c.agent)
    )
    return stmt.where(u.c.owner == _p(u, "owner")) if by_owner else stmt


_HOLD_COLUMNS = tuple(c.name for c in spend_holds.columns)
_USAGE_COLUMNS = tuple(c.name for c in usage_days.columns)


def _hold(row: Row, decode: TimeDecoder) -> Hold:
    values = dict(zip(_HOLD_COLUMNS, row, strict=True))
    accounts = tuple((pool, owner) for pool, owner in json.loads(values["accounts"]))
    return Hold(
        id=values["id"],
        owner=values["owner"],
        day=values["day"],
        amount=values["amount_usd"],
        accounts=accounts,
        model=values["model"],
        created_at=decode(values["created_at"]),
        agent=values["agent"],
        holder=values["holder"],
        unit=values["unit_usd"],
        drawn=values["drawn_usd"],
        calls=values["calls"],
        tokens_in=values["tokens_in"],
        tokens_out=values["tokens_out"],
        cache_read_tokens=values["cache_read_tokens"],
        cache_write_tokens=values["cache_write_tokens"],
        cost=values["cost_usd"],
        unpriced_calls=values["unpriced_calls"],
    )


class SQLSpend:
    """The spend methods of ``SQLiteStore`` and ``PostgresStore``."""

    _dialect: str
    _decode_time: TimeDecoder

    @abstractmethod
    async def _lease_write(self, work: Callable[[LeaseTx], T]) -> T:
        """Run ``work`` in a write transaction of its own; what it returns."""

    @abstractmethod
    def _bind_time(self, value: datetime) -> Any: ...

    @abstractmethod
    async def _fetch(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]: ...

    @property
    def _spend(self) -> dict[str, sa.Executable]:
        return statements(self._dialect)

    def _standing(self, tx: LeaseTx, account: Account, now: datetime) -> Standing:
        since = start(account.limit.period, now)
        params = {"pool": account.pool, "owner": account.owner, "since": since}
        ((spent, reserved),) = tx.rows(self._spend["standing"], params)
        return Standing(account, round(spent, 9), max(0.0, round(reserved, 9)), since)

    def _add(self, tx: LeaseTx, key: AccountKey, day: str, spent: float, held: float) -> None:
        params = {"pool": key[0], "owner": key[1], "day": day}
        tx.execute(self._spend["add"], params | {"spent_usd": spent, "reserved_usd": held})

    def _count(self, tx: LeaseTx, charge: Charge) -> None:
        tx.execute(self._spend["count"], _usage_params(charge))

    def _charge(self, tx: LeaseTx, charge: Charge) -> None:
        for key in sorted(charge.accounts):
            self._add(tx, key, charge.day, charge.cost or 0.0, 0.0)
        self._count(tx, charge)

    async def reserve_spend(
        self, hold: Hold, accounts: Sequence[Account], now: datetime, decide: Decide
    ) -> Verdict:
        locks = self._dialect == "postgresql"  # SQLite's BEGIN IMMEDIATE: one writer

        def work(tx: LeaseTx) -> Verdict:
            for key in sorted(hold.accounts) if locks else ():  # the day's rows, in one order
                self._add(tx, key, hold.day, 0.0, 0.0)
            tab = self._take(tx, hold.id) if hold.unit is not None else None
            if tab is not None:  # a tab's calls so far charged, its reservation released
                dropped(tx.execute, (self._spend["add"], self._spend["count"]), tab, False)
            verdict = decide([self._standing(tx, account, now) for account in accounts])
            if isinstance(verdict, Allow):
                for key in sorted(hold.accounts):
                    self._add(tx, key, hold.day, 0.0, hold.amount)
                tx.execute(self._spend["insert_hold"], self._hold_params(hold))
            return verdict

        return await self._lease_write(work)

    def _hold_params(self, hold: Hold) -> dict[str, Any]:
        return {
            "id": hold.id,
            "owner": hold.owner,
            "day": hold.day,
            "amount_usd": hold.amount,
            "accounts": _accounts_json(hold.accounts),
            "model": hold.model,
            "agent": hold.agent,
            "holder": hold.holder,
            "created_at": self._bind_time(hold.created_at),
            "unit_usd": hold.unit,
        } | dict.fromkeys(("drawn_usd", *_USAGE_COUNTS), 0)

    def _take(self, tx: LeaseTx, hold_id: str) -> Hold | None:
        found = tx.rows(self._spend["take_hold"], {"b_id": hold_id})
        return _hold(found[0], self._decode_time) if found else None

    async def settle_spend(self, hold_id: str | None, charge: Charge) -> None:
        def work(tx: LeaseTx) -> None:
            if hold_id is not None:
                hold = self._take(tx, hold_id)
                if hold is None:
                    return  # recovery charged it at its estimate
                for key in sorted(hold.accounts):
                    self._add(tx, key, hold.day, 0.0, -hold.amount)
            self._charge(tx, charge)

        await self._lease_write(work)

    async def charge_hold(self, hold_id: str) -> bool:
        def work(tx: LeaseTx) -> bool:
            hold = self._take(tx, hold_id)
            if hold is None:
                return False
            dropped(tx.execute, (self._spend["add"], self._spend["count"]), hold, True)
            return True

        return await self._lease_write(work)

    async def spend_standings(self, accounts: Sequence[Account], now: datetime) -> list[Standing]:
        found = []
        for account in accounts:
            since = start(account.limit.period, now)
            params = {"pool": account.pool, "owner": account.owner, "since": since}
            ((spent, reserved),) = await self._fetch(self._spend["standing"], params)
            found.append(Standing(account, round(spent, 9), max(0.0, round(reserved, 9)), since))
        holds = await self.spend_holds() if found else []
        return [standing_with_tabs(standing, holds) for standing in found]

    async def spend_holds(self) -> list[Hold]:
        return [_hold(row, self._decode_time) for row in await self._fetch(_HOLDS, {})]

    async def usage_rows(self, owner: str | None, since: str, until: str) -> list[UsageRow]:
        if "\x00" in (owner or ""):
            return []
        params = {"owner": owner, "since": since, "until": until}
        found = await self._fetch(_usage_of(owner is not None), params)
        names = _USAGE_COLUMNS
        rows = [UsageRow(**dict(zip(names, row, strict=True))) for row in found]
        return with_tabs(rows, await self.spend_holds(), owner, since, until)
