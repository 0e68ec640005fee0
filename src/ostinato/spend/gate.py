"""The spend gate: a model call checked against the budgets before it is made, and its
cost charged after. Effects only: the verdict is ``spend.rule``'s, the standing and the
reservation are the store's (``store.spend``).

Every model call goes through here, where it is made: a turn's own step
(``loop.spending``) and every side call (``models.assembly.complete``: routing,
compaction summaries, fact extraction, background jobs). The gate of the turn or job
under way is found in a context variable (``spend.seam.GATE``, set by the runtime as a
turn begins and by the job runner); the owner and agent the call is charged to are
those of the turn or job it is part of (``ostinato.observe``'s scope under way: a
sub-agent's calls are its own turn's, whose owner is the person's). With no gate, a
call is neither checked nor counted.

``clear`` estimates the call's cost (its input tokens by estimate, its output at its
``max_tokens``, or ``Budgets.output_tokens``) and, when any limit is set, reserves it in
the store (one transaction that reads the standing and decides); with no limit at all
nothing is reserved and the call is only counted. ``charge`` settles the reservation at
the call's actual cost and counts it in its owner's usage. A turn's own calls go on the
turn's tab instead (``loop.spending``): ``clear`` with ``tab`` reserves for the tab,
for several calls at a time (``block``), and ``bill`` is what a call adds to it;
a turn that ends leaves its tab in ``parking`` for the next turn of its payer.
A side call never asks a person: only a turn's own step can wait for the soft-limit card.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from time import monotonic

from ostinato import observe
from ostinato.context.tokens import estimate_input
from ostinato.errors import SpendLimitReached
from ostinato.ids import new_id
from ostinato.models.base import ModelRequest, Usage
from ostinato.observe import prices
from ostinato.spend import words
from ostinato.spend.limits import Budgets
from ostinato.spend.parking import Parking
from ostinato.spend.rule import (
    Account,
    Allow,
    Refuse,
    Standing,
    Verdict,
    day_of,
    decide,
    resets_at,
)
from ostinato.spend.seam import Settle
from ostinato.store.base import utcnow
from ostinato.store.spend import AccountKey, Charge, CloseTab, Hold, SettleSpend, SpendStore

log = logging.getLogger("ostinato.spend")
NO_USAGE = Usage()
ALLOW = Allow()
MANY_COUNTED = 10_000  # ``counted``'s payers kept at most (then made again)
BLOCK = 8  # a tab reserves for this many calls at a time when it can (``clear``)


@dataclass(frozen=True, slots=True)
class Payer:
    """Whom a call is charged to: the owner who caused it, and the agent it ran under
    (``""`` for a call outside any agent's turn: routing, a job)."""

    owner: str | None
    agent: str


def payer() -> Payer:
    """The payer of a call made now: the owner and agent of the turn (or job) under way."""
    holder = observe.nearest_holder()
    if holder is None:
        return Payer(None, "")
    agent = getattr(holder, "agent", None)
    link = getattr(holder, "link", None)  # work after a turn: the turn's agent
    if agent is None and link is not None:
        agent = getattr(link, "agent", None)
    return Payer(holder.owner, agent or "")


@dataclass(slots=True)  # not frozen: made once a checked call (``store.spend``)
class Held:
    """A call cleared to go: what it is charged to, and its reservation (None when no
    limit applies: it is only counted)."""

    payer: Payer
    model: str
    day: str
    accounts: tuple[tuple[str, str], ...]
    hold: Hold | None
    drawn: float = 0.0  # on a turn's tab: the call's estimate, drawn from what it reserved


@dataclass(slots=True)  # not frozen: made once a checked call (``store.spend``)
class Clearance:
    verdict: Verdict
    held: Held | None  # set when the verdict is ``Allow``


class SpendGate:
    """Checks and charges model calls for one store; ``budgets`` may be replaced (a
    configuration reload): the next call is checked against the new limits."""

    def __init__(
        self,
        store: SpendStore,
        budgets: Budgets,
        *,
        holder: Callable[[], str | None] = lambda: None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.store, self.holder, self.clock = store, holder, clock
        self._date: date | None = None
        self._day_key = ""
        self._day_ends = 0.0  # ``today``'s: when the day of ``_day_key`` ends (monotonic)
        self.parking = Parking(self._close_tabs)  # turns' tabs between turns
        self.budgets = budgets  # sets what follows from them (the setter)

    @property
    def budgets(self) -> Budgets:
        return self._budgets

    @budgets.setter
    def budgets(self, budgets: Budgets) -> None:
        """The budgets in force (a reload replaces them): the next call is checked
        against these; the tabs parked under the old ones are closed."""
        self.parking.discard_all()
        self._budgets = budgets
        self.checks = budgets.any  # any limit set (else calls are only counted)
        self._made: dict[str | None, tuple[tuple[Account, ...], tuple[AccountKey, ...]]] = {}
        self._counts: dict[tuple[str | None, str, str], Held] = {}  # ``counted``'s

    def estimate(
        self, model: str, request: ModelRequest, tokens_in: int | None = None
    ) -> float | None:
        """The call's cost at most (its output at its max), None when it has no price;
        ``tokens_in``: its input tokens when the caller knows them (a turn's context
        keeper estimates its requests as they grow), else estimated here."""
        tokens_in = estimate_input(request) if tokens_in is None else tokens_in
        tokens_out = request.max_tokens or self.budgets.output_tokens
        return prices.tokens_cost(model, tokens_in, tokens_out, 0, 0, tokens_in)

    async def clear(
        self,
        model: str,
        request: ModelRequest,
        *,
        ask: bool,
        consented: frozenset[str] = frozenset(),
        who: Payer | None = None,
        tokens_in: int | None = None,
        tab: str | None = None,
        block: int = 1,
    ) -> Clearance:
        """Whether the call may go: ``Allow`` with its reservation, ``Ask`` (past a soft
        limit, only when ``ask``) or ``Refuse``. ``consented``: the soft limits the owner
        agreed to pass (``rule.consent_key``). ``tab``: the id of the turn's tab the
        reservation is added to (``loop.spending``), which then reserves for ``block``
        calls at this one's estimate when that much is allowed, else for ``BLOCK``
        calls, else for this one."""
        who = who or payer()
        if not self.checks:  # nothing to check: only counted
            return Clearance(ALLOW, self.counted(who, model))
        budgets, now = self.budgets, self.clock()
        accounts, keys = self._accounts(who.owner)
        day = self._day(now)
        estimate = self.estimate(model, request, tokens_in)
        hold = Hold(
            tab or new_id(), who.owner or "", day, estimate or 0.0, keys, model, now, who.agent,
            self.holder(), None if tab is None else estimate or 0.0,
        )  # fmt: skip

        def rule(standings: list[Standing]) -> Verdict:
            each = hold.amount = estimate or 0.0
            sizes = (block, BLOCK) if block > BLOCK else (block,)
            for size in sizes if each and block > 1 else ():
                verdict = decide(  # several calls' worth, when they fit as they are
                    standings, each * size, consented=consented, unpriced=budgets.unpriced
                )
                if isinstance(verdict, Allow):
                    hold.amount = each * size
                    return verdict
            return decide(
                standings, estimate, consented=consented, unpriced=budgets.unpriced, ask=ask
            )

        verdict = await self.store.reserve_spend(hold, accounts, now, rule)  # type: ignore[arg-type]
        if not isinstance(verdict, Allow):
            return Clearance(verdict, None)
        return Clearance(verdict, Held(who, model, day, keys, hold, estimate or 0.0))

    def today(self) -> str:
        """The day a call made now is charged to (an ISO date). With the real clock it is
        read against a monotonic deadline, midnight UTC, instead of the clock (a step
        asks every time): a wall clock set back or forth moves the day's end by as much."""
        if self.clock is utcnow and monotonic() < self._day_ends:
            return self._day_key
        now = self.clock()
        day = self._day(now)
        if self.clock is utcnow and now.tzinfo is UTC:
            self._day_ends = monotonic() + (resets_at("day", now) - now).total_seconds()
        return day

    def counted(self, who: Payer, model: str) -> Held:
        """What a call that is only counted (``checks`` is False) is charged to: the same
        for every call of one payer and model in a day, so made once (a step makes one)."""
        day = self.today()
        key = (who.owner, who.agent, model)
        found = self._counts.get(key)
        if found is None or found.day != day:
            if len(self._counts) >= MANY_COUNTED:
                self._counts.clear()
            keys = self._accounts(who.owner)[1]
            found = self._counts[key] = Held(who, model, day, keys, None)
        return found

    def _day(self, now: datetime) -> str:
        """``day_of(now)``, worked out once a day."""
        if now.tzinfo is not UTC:
            return day_of(now)
        date = now.date()
        if date != self._date:
            self._date, self._day_key = date, day_of(now)
        return self._day_key

    def _accounts(self, owner: str | None) -> tuple[tuple[Account, ...], tuple[AccountKey, ...]]:
        """``budgets.accounts(owner)`` and their keys, made once per owner for the budgets
        in force."""
        found = self._made.get(owner)
        if found is None:
            accounts = self.budgets.accounts(owner)
            found = self._made[owner] = accounts, tuple((a.pool, a.owner) for a in accounts)
        return found

    async def charge(self, held: Held, usage: Usage | None) -> None:
        """Settle a call that was made (or cut short) at what it cost."""
        await self.settle(self.settlement(held, usage))

    async def settle(self, op: SettleSpend) -> None:
        """Run a settlement in a transaction of its own."""
        await self.store.settle_spend(op.hold_id, op.charge)

    def settlement(self, held: Held, usage: Usage | None) -> SettleSpend:
        """The write op that settles a call at what it cost: ``settle`` runs it alone."""
        hold = held.hold
        return SettleSpend(hold.id if hold is not None else None, self.bill(held, usage))

    def bill(self, held: Held, usage: Usage | None) -> Charge:
        """What a call cost (``usage``: what it used), charged to what it was cleared
        for; a turn's step counts it on the turn's tab (``loop.spending``)."""
        usage = usage or NO_USAGE
        hold, who = held.hold, held.payer
        return Charge(  # positional: this runs once a model call
            who.owner or "",
            hold.day if hold is not None else held.day,
            held.model,
            who.agent,
            held.accounts,  # type: ignore[arg-type]
            prices.cost(held.model, usage),
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
        )

    async def _close_tabs(self, ids: tuple[str, ...]) -> None:
        """Charge the tabs ``ids`` in one write (``parking``'s)."""
        await self.store.write(*(CloseTab(tab) for tab in ids))  # type: ignore[attr-defined]

    async def side_call(self, model: str, request: ModelRequest) -> Settle | None:
        """``seam.SideCalls``: clear a call that never asks (``SpendLimitReached`` when a
        budget refuses it); what charges it once it has ended."""
        clearance = await self.clear(model, request, ask=False)
        verdict, held = clearance.verdict, clearance.held
        if isinstance(verdict, Refuse):
            sentence = words.stopped(verdict, self.clock(), self.budgets.currency)
            raise SpendLimitReached(sentence)
        assert held is not None

        async def settle(usage: Usage | None) -> None:
            try:
                await self.charge(held, usage)
            except Exception:  # the call was made: failing to count it must not fail it
                log.exception("could not charge a model call to %r", held.payer.owner)

        return settle
