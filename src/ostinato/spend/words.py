"""What a person is told about spend: the soft-limit card's question and the sentence a
turn ends with at a hard limit, made from the rule's verdicts (``spend.rule``). Pure."""

from __future__ import annotations

from datetime import datetime

from ostinato.spend.rule import Account, Ask, Refuse, resets_at

SYMBOLS = {"USD": "$"}


def money(amount: float, currency: str = "USD") -> str:
    """``$4.00``; amounts under a cent keep four decimals (``$0.0012``)."""
    symbol = SYMBOLS.get(currency)
    text = f"{amount:,.2f}" if amount == 0 or abs(amount) >= 0.01 else f"{amount:.4f}"
    return f"{symbol}{text}" if symbol else f"{text} {currency}"


def _when(period: str) -> tuple[str, str]:
    return ("today's", "today") if period == "day" else ("this month's", "this month")


def _limit(account: Account, period: str, amount: str, kind: str = "limit") -> str:
    """``today's limit of $5.00``, ``the guests' shared limit of $1.00 for today``."""
    whose, span = _when(period)
    if account.pool == "owner":
        return f"{whose} {kind} of {amount}"
    who = "the guests' shared" if account.pool == "anonymous" else "this service's"
    return f"{who} {kind} of {amount} for {span}"


def question(verdict: Ask, currency: str = "USD") -> str:
    """The soft-limit card: ``This will take you past $4.00 of today's $5.00 ...``."""
    standing = verdict.standing
    limit = standing.account.limit
    assert limit.soft is not None
    soft = money(limit.soft, currency)
    if standing.account.pool == "owner" and limit.hard is not None:
        past = f"{soft} of {_when(limit.period)[0]} {money(limit.hard, currency)}"
    else:
        past = _limit(standing.account, limit.period, soft, "soft limit")
    spent = standing.spent + standing.reserved
    return (
        f"This will take you past {past} ({money(spent, currency)} spent so far; this step "
        f"may cost up to {money(verdict.estimate, currency)}). Continue?"
    )


def until(moment: datetime, now: datetime) -> str:
    """``in 3 h 12 min`` from ``now``."""
    minutes = max(0, int((moment - now).total_seconds() // 60))
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    parts = ([f"{days} d"] if days else []) + ([f"{hours} h"] if hours else []) + [f"{mins} min"]
    return "in " + " ".join(parts)


def stopped(verdict: Refuse, now: datetime, currency: str = "USD") -> str:
    """The sentence a turn ends with when a call is refused: why, and when it resets."""
    standing = verdict.standing
    if standing is None:
        return (
            "I stopped before the next step: its model has no known price, and this "
            "service does not make calls it cannot count against its budgets."
        )
    limit = standing.account.limit
    assert limit.hard is not None
    spent = standing.spent + standing.reserved
    reset = resets_at(limit.period, now)
    return (
        f"I stopped before the next step: it would go past "
        f"{_limit(standing.account, limit.period, money(limit.hard, currency))} "
        f"({money(spent, currency)} spent so far). It resets at "
        f"{reset:%Y-%m-%d %H:%M} UTC, {until(reset, now)}."
    )


def declined(verdict: Ask, currency: str = "USD") -> str:
    """The sentence a turn ends with when the person did not agree to pass a soft limit."""
    account = verdict.standing.account
    assert account.limit.soft is not None
    soft = money(account.limit.soft, currency)
    return (
        f"I stopped before the next step, so as not to go past "
        f"{_limit(account, account.limit.period, soft, 'soft limit')}. Send a message to go on."
    )
