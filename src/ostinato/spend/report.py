"""Usage as a person or an operator reads it: the stored rows (``store.spend.UsageRow``,
one per owner, day, model and agent) added up by day, model, agent or owner. Pure.

A cost is known only when every call counted in it had a price: a sum that includes a
call whose model had none has ``cost`` ``None`` (never a zero that hides it), beside the
priced calls' own sum (``priced_cost``) and how many calls had no price.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from ostinato.store.spend import UsageRow

MAX_DAYS = 366  # the longest span one report covers


@dataclass(frozen=True, slots=True)
class Count:
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    priced_cost: float = 0.0
    unpriced_calls: int = 0

    @property
    def cost(self) -> float | None:
        """The cost of every call counted, or None when some had no price."""
        return None if self.unpriced_calls else round(self.priced_cost, 9)

    def plus(self, row: UsageRow) -> Count:
        return Count(
            self.calls + row.calls,
            self.tokens_in + row.tokens_in,
            self.tokens_out + row.tokens_out,
            self.cache_read_tokens + row.cache_read_tokens,
            self.cache_write_tokens + row.cache_write_tokens,
            self.priced_cost + row.cost_usd,
            self.unpriced_calls + row.unpriced_calls,
        )


def total(rows: Iterable[UsageRow]) -> Count:
    found = Count()
    for row in rows:
        found = found.plus(row)
    return found


def by(rows: Iterable[UsageRow], key: Callable[[UsageRow], str]) -> dict[str, Count]:
    """The rows added up by ``key``, in the order of the keys."""
    found: dict[str, Count] = {}
    for row in rows:
        name = key(row)
        found[name] = found.get(name, Count()).plus(row)
    return dict(sorted(found.items()))


def span(since: date | None, until: date | None, now: datetime) -> tuple[date, date]:
    """The days a report covers: ``since`` (default: the first of this month) to
    ``until`` (default: today), both included; ``ValueError`` saying what is wrong when
    they are reversed or more than ``MAX_DAYS`` apart."""
    today = now.date()
    until = until or today
    since = since or until.replace(day=1)
    if since > until:
        raise ValueError(f"'since' ({since}) is after 'until' ({until})")
    if until - since >= timedelta(days=MAX_DAYS):
        raise ValueError(f"a report covers at most {MAX_DAYS} days")
    return since, until
