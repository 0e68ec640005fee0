"""A turn's own model calls against the budgets (``ostinato.spend``): each is cleared
before it is made and charged after.

Past a soft limit the person is asked first, as an approval (``ConsentGate.ask_spend``:
a card any surface shows, answered from any of them, after a reload too); agreed, the
call goes on, and the grant the agreement leaves covers the rest of the period. Past a
hard limit (or when the person does not agree) the call is not made: ``Stopped``
carries the sentence the turn ends with, ``spend_limit``.

A call that was made is charged with its reply: ``owe`` keeps its settlement, the
driver commits it with the reply's row (``owed``, then ``paid``), and a reply that is
not committed (a failed write, a cancel before it) has it settled alone (``unpaid``).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Protocol, runtime_checkable

from ostinato import observe
from ostinato.approvals import SPEND, Ending
from ostinato.messages import JSON
from ostinato.models.base import ModelRequest, Usage
from ostinato.spend import words
from ostinato.spend.gate import Held, Payer, SpendGate, payer
from ostinato.spend.rule import Allow, Ask, Refuse, consent_key, resets_at
from ostinato.store.base import Turn
from ostinato.store.inflight import written
from ostinato.store.spend import SettleSpend

log = logging.getLogger("ostinato.spend")
MAX_ASKS = 3  # one account after another may ask; each only once in a turn


class Stopped(Exception):
    """The call was not made: a budget's hard limit, or the person did not agree to pass
    a soft one. ``sentence`` is what the turn ends with; ``detail`` is kept with it."""

    def __init__(self, sentence: str, detail: JSON) -> None:
        super().__init__(sentence)
        self.sentence, self.detail = sentence, detail


@runtime_checkable
class SpendAsker(Protocol):
    async def ask_spend(
        self, turn: Turn, card: JSON, key: str, *, owner: str | None, seq: int
    ) -> Ending: ...


class TurnSpend:
    """The spend gate as one turn's own calls meet it."""

    def __init__(
        self,
        gate: SpendGate,
        asker: SpendAsker | None,
        turn: Turn,
        owner: str | None,
        store: object = None,
    ) -> None:
        self.gate, self.asker, self.turn, self.owner = gate, asker, turn, owner
        # the charge goes with the reply's row only where the turn's rows are the gate's
        # store's (a sub-agent writes to a scratch store: its calls are charged alone)
        self.folds = store is gate.store
        self.consented: frozenset[str] = frozenset()  # soft limits agreed to in this turn
        self.owing: SettleSpend | None = None  # the last call's charge, until its reply commits
        self.who: Payer | None = None  # the turn's: found at its first call, kept for the rest

    @classmethod
    def of(
        cls, gate: object, asker: SpendAsker | None, turn: Turn, owner: str | None, store: object
    ) -> TurnSpend | None:
        """The turn's, when ``gate`` (the one in force) is a ``SpendGate``."""
        return cls(gate, asker, turn, owner, store) if isinstance(gate, SpendGate) else None

    async def clear(
        self, model: str, request: ModelRequest, seq: int, tokens_in: int | None = None
    ) -> Held | None:
        """The call's reservation once it may go; ``Stopped`` when it may not.
        ``tokens_in``: the request's input tokens, when the turn has estimated them."""
        who = self.who = self.who or payer()
        if not self.gate.checks:  # only counted: nothing to reserve or ask
            return self.gate.counted(who, model)
        for _ in range(MAX_ASKS + 1):
            clearance = await self.gate.clear(
                model, request, ask=True, consented=self.consented, who=who, tokens_in=tokens_in
            )
            verdict = clearance.verdict
            if isinstance(verdict, Allow):
                return clearance.held
            if isinstance(verdict, Refuse):
                raise Stopped(
                    words.stopped(verdict, self.gate.clock(), self.currency), _of(verdict)
                )
            await self._ask(verdict, seq)
        raise AssertionError("a soft limit asked twice in one turn")

    @property
    def currency(self) -> str:
        return self.gate.budgets.currency

    async def _ask(self, verdict: Ask, seq: int) -> None:
        standing = verdict.standing
        key = consent_key(standing.account, standing.since)
        if key in self.consented:
            raise AssertionError(f"asked again to pass {key}")
        card = _card(verdict, self.gate.clock(), self.currency)
        ending = Ending.UNREACHABLE
        if self.asker is not None:
            with observe.approval(SPEND) as watch:
                ending = await self.asker.ask_spend(self.turn, card, key, owner=self.owner, seq=seq)
                watch.ending(ending.value)
        if ending is not Ending.APPROVED:
            detail = {**_of(verdict), "ending": ending.value}
            raise Stopped(words.declined(verdict, self.currency), detail)
        self.consented |= {key}

    async def charge(self, held: Held | None, usage: Usage | None) -> None:
        if held is not None:
            await self.gate.charge(held, usage)

    async def owe(self, held: Held | None, usage: Usage | None) -> None:
        """The call was made and replied: its charge goes with the reply's row (``owed``),
        or is settled now where the turn writes elsewhere (``folds``)."""
        if held is None:
            return
        op = self.gate.settlement(held, usage)
        if self.folds:
            self.owing = op
        else:
            await self.gate.settle(op)

    def owed(self) -> tuple[SettleSpend, ...]:
        """The ops to commit with the reply's row (its charge, if owed)."""
        return () if self.owing is None else (self.owing,)

    def paid(self) -> None:
        """The reply's row, and its charge with it, committed."""
        self.owing = None

    async def unpaid(self, error: BaseException) -> None:
        """The reply's row was not committed (``error``): the charge is settled alone,
        unless a cancel came after the write had committed it (``written``)."""
        op, self.owing = self.owing, None
        if op is None or written(error) is not None:
            return
        try:
            await asyncio.shield(self.gate.settle(op))
        except Exception:  # the call was made: failing to count it must not hide ``error``
            log.exception("could not charge a model call of turn %s", self.turn.id)


def _card(verdict: Ask, now: datetime, currency: str) -> JSON:
    """What a soft-limit card carries: the question and its figures."""
    standing = verdict.standing
    limit = standing.account.limit
    return {
        "question": words.question(verdict, currency),
        "currency": currency,
        "account": standing.account.pool,
        "period": limit.period,
        "soft": limit.soft,
        "hard": limit.hard,
        "spent": round(standing.spent + standing.reserved, 6),
        "estimate": round(verdict.estimate, 6),
        "resets_at": resets_at(limit.period, now).isoformat(),
    }


def _of(verdict: Ask | Refuse) -> JSON:
    """What the turn's closing row keeps of the verdict that stopped it."""
    standing = verdict.standing
    if standing is None:
        return {"unpriced": True}
    limit = standing.account.limit
    return {
        "account": standing.account.pool,
        "period": limit.period,
        "soft": limit.soft,
        "hard": limit.hard,
        "spent": round(standing.spent + standing.reserved, 6),
        "estimate": round(verdict.estimate, 6) if verdict.estimate is not None else None,
    }
