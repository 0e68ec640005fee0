"""``GET /v1/usage``: what the caller's model calls used and cost, by day, model and agent,
and where the caller stands against their budget (``ostinato.spend``).

Every call a turn of the caller caused is counted here (its own steps, routing,
summaries, sub-agents, work after the turn, memory jobs), charged to the caller. A cost
is ``null`` when a call counted in it had no price (``unpriced_calls`` says how many;
``priced_cost_usd`` is the rest), never a zero.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, BeforeValidator, Field

from ostinato.errors import InvalidRequest
from ostinato.server.auth import CurrentCaller
from ostinato.server.context import Context
from ostinato.server.schemas import ErrorBody
from ostinato.spend import report
from ostinato.spend.rule import Account, Standing, resets_at
from ostinato.store.base import utcnow
from ostinato.store.spend import SpendStore, UsageRow

router = APIRouter(prefix="/v1", tags=["usage"])

ERRORS: dict[int | str, dict[str, Any]] = {
    422: {
        "model": ErrorBody,
        "description": "A day is not a date (YYYY-MM-DD), `since` is after `until`, or "
        "they are more than 366 days apart.",
    },
}


def _iso_day(value: Any) -> Any:
    """Only ``YYYY-MM-DD``: pydantic alone also takes a number as a Unix time (``0``)."""
    if value is not None and not (isinstance(value, str) and ISO_DAY.fullmatch(value)):
        raise ValueError("a day is written YYYY-MM-DD")
    return value


ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
Day = Annotated[date | None, BeforeValidator(_iso_day)]
Since = Annotated[
    Day, Query(description="The first day counted (UTC); default: the 1st of the month.")
]
Until = Annotated[Day, Query(description="The last day counted (UTC); default: today.")]


class CountOut(BaseModel):
    calls: int
    tokens_in: int
    tokens_out: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float | None = Field(
        description="What the calls cost; null when any of them had no price."
    )
    priced_cost_usd: float = Field(description="What the calls that had a price cost.")
    unpriced_calls: int = Field(description="Calls whose model had no price.")

    @classmethod
    def fields_of(cls, count: report.Count) -> dict[str, Any]:
        return {
            "calls": count.calls,
            "tokens_in": count.tokens_in,
            "tokens_out": count.tokens_out,
            "cache_read_tokens": count.cache_read_tokens,
            "cache_write_tokens": count.cache_write_tokens,
            "cost_usd": count.cost,
            "priced_cost_usd": round(count.priced_cost, 9),
            "unpriced_calls": count.unpriced_calls,
        }


class DayOut(CountOut):
    day: date


class ModelOut(CountOut):
    model: str


class AgentOut(CountOut):
    agent: str | None = Field(description="The agent; null for calls outside one (routing, jobs).")


class RowOut(CountOut):
    day: date
    model: str
    agent: str | None


class BudgetOut(BaseModel):
    """Where one budget stands in its current period."""

    applies_to: Literal["owner", "anonymous", "deployment"] = Field(
        description="The caller's own budget, the one anonymous callers share, or the deployment's."
    )
    period: Literal["day", "month"]
    since: date = Field(description="The first day of the current period (UTC).")
    resets_at: datetime
    spent_usd: float = Field(description="Settled in this period.")
    reserved_usd: float = Field(description="Held for calls under way (their estimates).")
    soft_usd: float | None
    hard_usd: float | None

    @classmethod
    def of(cls, standing: Standing, now: datetime) -> BudgetOut:
        limit = standing.account.limit
        return cls(
            applies_to=standing.account.pool,
            period=limit.period,
            since=date.fromisoformat(standing.since),
            resets_at=resets_at(limit.period, now),
            spent_usd=standing.spent,
            reserved_usd=standing.reserved,
            soft_usd=limit.soft,
            hard_usd=limit.hard,
        )


class UsageOut(BaseModel):
    owner: str
    currency: str
    since: date
    until: date
    total: CountOut
    days: list[DayOut]
    models: list[ModelOut]
    agents: list[AgentOut]
    rows: list[RowOut] = Field(description="By day, model and agent.")
    budgets: list[BudgetOut] = Field(description="The caller's own budget, if one is set.")


def days(since: date | None, until: date | None) -> tuple[date, date]:
    try:
        return report.span(since, until, utcnow())
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from None


async def standings(context: Context, accounts: list[Account]) -> list[BudgetOut]:
    store, now = context.runtime.store, utcnow()
    bounded = [a for a in accounts if a.limit.bounds]
    if not bounded or not isinstance(store, SpendStore):
        return []
    return [BudgetOut.of(s, now) for s in await store.spend_standings(bounded, now)]


@router.get("/usage", response_model=UsageOut, responses=ERRORS)
async def usage(
    context: Context, caller: CurrentCaller, since: Since = None, until: Until = None
) -> UsageOut:
    """The caller's usage from `since` to `until` (UTC days, both included; at most 366
    days), and the caller's budget as it stands now."""
    first, last = days(since, until)
    store, gate = context.runtime.store, context.runtime.spend
    rows = []
    if isinstance(store, SpendStore):
        rows = await store.usage_rows(caller.owner, first.isoformat(), last.isoformat())
    own = [a for a in gate.budgets.accounts(caller.owner) if a.pool == "owner"] if gate else []
    return UsageOut(
        owner=caller.owner,
        currency=gate.budgets.currency if gate else "USD",
        since=first,
        until=last,
        total=CountOut(**CountOut.fields_of(report.total(rows))),
        days=[
            DayOut(day=date.fromisoformat(d), **CountOut.fields_of(c))
            for d, c in report.by(rows, _day).items()
        ],
        models=[
            ModelOut(model=m, **CountOut.fields_of(c)) for m, c in report.by(rows, _model).items()
        ],
        agents=[
            AgentOut(agent=a or None, **CountOut.fields_of(c))
            for a, c in report.by(rows, _agent).items()
        ],
        rows=[
            RowOut(
                day=date.fromisoformat(r.day),
                model=r.model,
                agent=r.agent or None,
                **CountOut.fields_of(report.total([r])),
            )
            for r in rows
        ],
        budgets=await standings(context, own),
    )


def _day(row: UsageRow) -> str:
    return row.day


def _model(row: UsageRow) -> str:
    return row.model


def _agent(row: UsageRow) -> str:
    return row.agent
