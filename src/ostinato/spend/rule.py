"""The spend rule: whether a model call may be made, given what its budgets have spent and
what it will cost. Pure: no store, no clock.

A call is charged to every **account** that applies to the owner who caused it: the
owner's own (their limit, or the default for every owner), the one all anonymous
callers share (an anonymous owner's calls), and the deployment's (everyone's). Each
account has a ``Limit``: a soft and a hard amount over a period (a UTC day or month),
either of which may be unset. ``Standing`` is what the account has spent in its
current period and what calls under way have reserved (their estimates, not yet
settled).

``decide`` takes the standings and the call's estimated cost (``None`` when its model
has no price) and returns ``Allow``, ``Ask`` or ``Refuse``. Its rules, in the order they
are checked:

1. A call whose cost is unknown (its model has no price) is allowed when the policy
   for unpriced calls is ``allow`` (it is counted in the usage, at no known cost), and
   refused (``Refuse`` with ``unpriced``) when it is ``refuse`` and some account has a
   limit.
2. For each account in order (owner, anonymous, deployment): when its spend so far, its
   reservations and the estimate together pass its hard limit, the call is refused:
   ``Refuse`` naming that account. (So several calls under way at once never pass a hard
   limit together by more than their estimates understate them.)
3. For each account in order: when the same sum passes its soft limit and the owner has
   not agreed to go past it in this period (``consented`` holds the account's key),
   ``Ask`` naming that account. Only a call that can ask (``ask``: a turn's own step,
   where a person may answer) is held here; a side call (routing, a summary, a memory
   job) goes on up to the hard limit.
4. Otherwise ``Allow``.

Periods: a day runs from 00:00 UTC; a month from 00:00 UTC on its first day. ``start``
is the first day of the period a moment is in (an ISO date, the key the store keeps
spend under), ``resets_at`` the moment the next one begins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Literal, TypeAlias

Period: TypeAlias = Literal["day", "month"]
Pool: TypeAlias = Literal["owner", "anonymous", "deployment"]
Unpriced: TypeAlias = Literal["allow", "refuse"]
POOLS: tuple[Pool, ...] = ("owner", "anonymous", "deployment")


@dataclass(frozen=True, slots=True)
class Limit:
    """Amounts in the price table's currency over a period; ``None``: no such limit."""

    soft: float | None = None
    hard: float | None = None
    period: Period = "day"

    def __post_init__(self) -> None:
        for name, amount in (("soft", self.soft), ("hard", self.hard)):
            if amount is not None and amount < 0:
                raise ValueError(f"a {name} limit cannot be negative")
        if self.soft is not None and self.hard is not None and self.hard < self.soft:
            raise ValueError("the hard limit cannot be below the soft limit")

    @property
    def bounds(self) -> bool:
        return self.soft is not None or self.hard is not None


@dataclass(frozen=True, slots=True)
class Account:
    """Who a call is charged to: ``pool`` and, for an owner's own account, the owner
    (``""`` for the shared pools)."""

    pool: Pool
    owner: str
    limit: Limit

    @property
    def key(self) -> str:
        return f"{self.pool}:{self.owner}" if self.owner else self.pool


@dataclass(frozen=True, slots=True)
class Standing:
    """One account's spend in its current period (``since``, an ISO date) and what calls
    under way have reserved."""

    account: Account
    spent: float = 0.0
    reserved: float = 0.0
    since: str = ""

    def after(self, estimate: float) -> float:
        return self.spent + self.reserved + estimate


@dataclass(frozen=True, slots=True)
class Allow:
    pass


@dataclass(frozen=True, slots=True)
class Ask:
    """Past ``standing``'s soft limit: the person is asked first."""

    standing: Standing
    estimate: float


@dataclass(frozen=True, slots=True)
class Refuse:
    """The call is not made. ``standing`` is the account whose hard limit it would pass;
    ``None`` with ``unpriced``: its model has no price and unpriced calls are refused."""

    standing: Standing | None
    estimate: float | None
    unpriced: bool = False


Verdict: TypeAlias = Allow | Ask | Refuse


def decide(
    standings: Sequence[Standing],
    estimate: float | None,
    *,
    consented: frozenset[str] = frozenset(),
    unpriced: Unpriced = "allow",
    ask: bool = True,
) -> Verdict:
    """The verdict on one call (the rules in the module's docstring, in order)."""
    if estimate is None:
        limited = any(s.account.limit.bounds for s in standings)
        return Refuse(None, None, unpriced=True) if unpriced == "refuse" and limited else Allow()
    for standing in standings:
        hard = standing.account.limit.hard
        if hard is not None and standing.after(estimate) > hard:
            return Refuse(standing, estimate)
    if not ask:
        return Allow()
    for standing in standings:
        soft = standing.account.limit.soft
        key = consent_key(standing.account, standing.since)
        if soft is not None and standing.after(estimate) > soft and key not in consented:
            return Ask(standing, estimate)
    return Allow()


def consent_key(account: Account, since: str) -> str:
    """What an owner's agreement to pass ``account``'s soft limit is kept under: the
    account and the period it holds for."""
    return f"{account.key}@{account.limit.period}:{since}"


# --- periods ---------------------------------------------------------------------------


def day_of(at: datetime) -> str:
    """The UTC day of ``at`` (an ISO date)."""
    return at.astimezone(UTC).date().isoformat()


def start(period: Period, at: datetime) -> str:
    """The first day of the period ``at`` is in (an ISO date)."""
    day = at.astimezone(UTC).date()
    return (day if period == "day" else day.replace(day=1)).isoformat()


def resets_at(period: Period, at: datetime) -> datetime:
    """When the period ``at`` is in ends and the next begins (00:00 UTC)."""
    day = at.astimezone(UTC).date()
    if period == "day":
        nxt = date.fromordinal(day.toordinal() + 1)
    else:
        nxt = date(day.year + day.month // 12, day.month % 12 + 1, 1)
    return datetime(nxt.year, nxt.month, nxt.day, tzinfo=UTC)
