"""A turn's own model calls against the budgets (``ostinato.spend``): each is cleared
before it is made and charged after.

Past a soft limit the person is asked first, as an approval (``ConsentGate.ask_spend``:
a card any surface shows, answered from any of them, after a reload too); agreed, the
call goes on, and the grant the agreement leaves covers the rest of the period. Past a
hard limit (or when the person does not agree) the call is not made: ``Stopped``
carries the sentence the turn ends with, ``spend_limit``.

A call that was made is counted with its reply: ``owe`` keeps the op, the driver
commits it with the reply's row (``owed``, then ``paid``), and a reply that is not
committed (a failed write, a cancel before it) has it written alone (``unpaid``).

**The tab.** A turn's calls are counted on one row while it runs (``store.spend``'s
tab: ``TabSpend`` adds each call's tokens and cost to it, one statement with the reply's
row), and charged to the accounts and the usage when it closes (``closing`` parks it
or rides with the turn's last write; ``close`` writes it alone). Checked against a budget, the
tab reserves for ``BLOCK`` calls at the call's estimate when that much is allowed, and
each next call draws its estimate from what is left without a transaction of its own.
When it does not fit, the call reserves again, and that reservation first charges what
the tab counted and releases what it had reserved, so the standing it is decided on
holds the turn's calls at their cost; it is a block again, or the call alone, asking
or refused as the rule says. A reload's new budgets are met the same way: the next call
reserves under them. A sub-agent's calls, whose rows go to a store of their own, are
settled one by one instead.

**Between turns** the tab is parked (``spend.parking``): the next turn of the same
payer, model and day on this server goes on with it, drawing from what is left, and each
reservation a tab makes is for a larger block than its last (``BLOCK`` calls, doubled
each time up to ``MOST``, when that much fits), so a person's turns reserve rarely and
close their tab once, when it has been idle. A turn that agreed to pass a soft limit
closes its tab as it ends: what it reserved under that agreement is not lent to a turn
that did not agree.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Protocol, cast, runtime_checkable

from ostinato import observe
from ostinato.approvals import SPEND, Ending
from ostinato.ids import new_id
from ostinato.messages import JSON
from ostinato.models.base import ModelRequest, Usage
from ostinato.spend import words
from ostinato.spend.gate import BLOCK, Held, Payer, SpendGate, payer
from ostinato.spend.limits import Budgets
from ostinato.spend.parking import Parked
from ostinato.spend.rule import Allow, Ask, Refuse, consent_key, resets_at
from ostinato.store.base import Store, Turn, utcnow
from ostinato.store.inflight import written
from ostinato.store.spend import CloseTab, Hold, SettleSpend, TabSpend

log = logging.getLogger("ostinato.spend")
MAX_ASKS = 3  # one account after another may ask; each only once in a turn
MOST = 64  # the most calls one of a tab's reservations is for (``BLOCK`` doubled)


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
        # the calls go on the turn's tab only where the turn's rows are the gate's
        # store's (a sub-agent writes to a scratch store: its calls are charged alone)
        self.folds = store is gate.store
        self.store = cast("Store | None", store if self.folds else None)  # the driver's
        self.consented: frozenset[str] = frozenset()  # soft limits agreed to in this turn
        self.owing: TabSpend | SettleSpend | None = None  # the last call's, until its reply
        self.who: Payer | None = None  # the turn's: found at its first call, kept for the rest
        self.tab: Hold | None = None  # the turn's tab, once a call is on it
        self.left = 0.0  # what the tab reserved that its calls have not drawn
        self.under: Budgets | None = None  # the budgets it reserved under (None: none)
        self.blocks = 0  # reservations the tab made (in this turn and those before)

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
        if not self.gate.checks:  # only counted: nothing to reserve or ask
            return self.counted(model)
        return await self._checked(self._payer(model), model, request, seq, tokens_in)

    def counted(self, model: str) -> Held | None:
        """``clear`` of a call when no limit is set (``gate.checks`` is False): only
        counted, so nothing to wait for (a step calls this without a coroutine)."""
        return self.gate.counted(self.who or self._payer(model), model)

    def _payer(self, model: str) -> Payer:
        """The turn's payer; found at its first call, which takes the tab a turn before
        left parked for this payer, model and day, if it can go on with it."""
        who = self.who
        if who is not None:
            return who
        who = self.who = payer()
        if self.folds and self.tab is None:
            gate = self.gate
            found = gate.parking.take((who.owner or "", who.agent, model, gate.today()))
            if found is None:
                return who
            if (
                found.budgets is gate.budgets
                and found.tab.accounts == gate.counted(who, model).accounts
            ):
                self.tab, self.left, self.under, self.blocks = (
                    found.tab,
                    found.left,
                    found.under,
                    found.blocks,
                )
            else:  # parked under other budgets (a reload): closed, not taken
                gate.parking.discard(found)
        return who

    async def _checked(
        self, who: Payer, model: str, request: ModelRequest, seq: int, tokens_in: int | None
    ) -> Held | None:
        gate = self.gate
        if self.folds:
            if self._elsewhere(model, gate.today()):
                await self.close()  # a tab of another model or day: charged first
            drawn = self.drawn(model, request, tokens_in)
            if drawn is not None:
                return drawn
        tab_id = self._tab_id() if self.folds else None
        # the reservation takes the tab first (charged, its reservation released), even
        # when it refuses or asks: nothing is left to draw from until one is allowed
        self.left, self.under = 0.0, None
        for _ in range(MAX_ASKS + 1):
            clearance = await gate.clear(
                model, request, ask=True, consented=self.consented, who=who,
                tokens_in=tokens_in, tab=tab_id, block=self._block() if tab_id else 1,
            )  # fmt: skip
            verdict = clearance.verdict
            if isinstance(verdict, Allow):
                return self._reserved(clearance.held)
            if isinstance(verdict, Refuse):
                raise Stopped(words.stopped(verdict, gate.clock(), self.currency), _of(verdict))
            await self._ask(verdict, seq)
        raise AssertionError("a soft limit asked twice in one turn")

    def drawn(self, model: str, request: ModelRequest, tokens_in: int | None) -> Held | None:
        """The call cleared by drawing its estimate from what the tab reserved, with no
        transaction (and no coroutine) of its own; None when it must reserve (``clear``):
        nothing reserved under the budgets in force, too little left, or a tab of another
        model or day."""
        who = self.who or self._payer(model)  # a turn's first call may take a parked tab
        tab, gate = self.tab, self.gate
        if tab is None or self.under is not gate.budgets or tab.model != model:
            return None  # none, one that only counted, a reload, another model: reserve
        if tab.day != gate.today():
            return None
        estimate = gate.estimate(model, request, tokens_in)
        if estimate is None or estimate > self.left:
            return None
        self.left -= estimate
        return Held(who, model, tab.day, tab.accounts, tab, estimate)

    def _elsewhere(self, model: str, day: str) -> bool:
        """The turn has a tab, of another model or day than a call's (to close first)."""
        tab = self.tab
        return tab is not None and (tab.model != model or tab.day != day)

    def _block(self) -> int:
        """How many calls the tab's next reservation is for: ``BLOCK``, doubled with
        each reservation it made before, up to ``MOST``."""
        return min(MOST, BLOCK << min(self.blocks, 6))

    def _tab_id(self) -> str:
        return self.tab.id if self.tab is not None else new_id()

    def _reserved(self, held: Held | None) -> Held | None:
        """A reservation made for the tab: what is left of it to draw from."""
        if held is None or held.hold is None or not self.folds:
            return held
        self.tab = held.hold  # the store charged what the tab had counted: it goes on
        self.left = held.hold.amount - held.drawn
        self.under = self.gate.budgets
        self.blocks += 1
        return held

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
        """A call that was made but has no reply to go with: counted now."""
        if held is None:
            return
        if not self.folds:
            await self.gate.charge(held, usage)
        elif self.store is not None:
            await self.store.write(await self._tab_op(held, usage))

    async def owe(self, held: Held | None, usage: Usage | None) -> None:
        """The call was made and replied: it is counted with the reply's row (``owed``),
        or settled now where the turn writes elsewhere (``folds``)."""
        if held is None:
            return
        if self.folds:
            self.owing = self._on_tab(held, usage) or await self._tab_op(held, usage)
        else:
            await self.gate.settle(self.gate.settlement(held, usage))

    async def _tab_op(self, held: Held, usage: Usage | None) -> TabSpend:
        """The op counting a call on the tab, after closing a tab of another model or
        day if there is one."""
        found = self._on_tab(held, usage)
        if found is None:
            await self.close()
            found = self._on_tab(held, usage)
        assert found is not None
        return found

    def _on_tab(self, held: Held, usage: Usage | None) -> TabSpend | None:
        """The op counting a call on the tab; a call only counted opens one. None when a
        tab of another model or day must be closed first (``_tab_op``)."""
        tab, opens = held.hold, False
        if tab is None:
            if self._elsewhere(held.model, held.day):
                return None
            tab = self.tab
            if tab is None:
                who, gate, opens = held.payer, self.gate, True
                tab = self.tab = Hold(
                    new_id(), who.owner or "", held.day, 0.0, held.accounts, held.model,  # type: ignore[arg-type]
                    utcnow(), who.agent, gate.holder(), 0.0,
                )  # fmt: skip
        return TabSpend(tab, self.gate.bill(held, usage), held.drawn, opens)

    def owed(self) -> tuple[TabSpend | SettleSpend, ...]:
        """The ops to commit with the reply's row (its call's, if owed)."""
        return () if self.owing is None else (self.owing,)

    def paid(self) -> None:
        """The reply's row, and its call's count with it, committed."""
        self.owing = None

    async def unpaid(self, error: BaseException) -> None:
        """The reply's row was not committed (``error``): the call is counted alone,
        unless a cancel came after the write had committed it (``written``)."""
        op, self.owing = self.owing, None
        if op is None or written(error) is not None:
            return
        try:
            if isinstance(op, TabSpend) and self.store is not None:
                await asyncio.shield(self.store.write(op))
            elif isinstance(op, SettleSpend):
                await asyncio.shield(self.gate.settle(op))
        except Exception:  # the call was made: failing to count it must not hide ``error``
            log.exception("could not charge a model call of turn %s", self.turn.id)

    def closing(self, park: bool = True) -> tuple[CloseTab, ...]:
        """The turn has ended: its tab parked for the next turn (``park``, unless the
        turn agreed to pass a soft limit), or the op that charges it, to go with the
        turn's last write (as is a tab the parked one displaced). A write that fails
        leaves the tab to recovery, which charges it once this server is gone."""
        tab, gate = self.tab, self.gate
        self.tab = None
        if tab is None:
            return ()
        if park and not self.consented:
            parked = Parked(tab, self.left, self.under, self.blocks, gate.budgets)
            tab = gate.parking.park(parked)
        self.left, self.under, self.blocks = 0.0, None, 0
        return () if tab is None else (CloseTab(tab.id),)

    async def close(self, *, park: bool = False) -> None:
        """Charge the tab in a write of its own (a turn handed over, or a tab of another
        model or day), or with ``park`` park it and charge only a tab that parking it
        displaced (a turn whose end is committed already: ``TurnDriver._conclude``). A
        failure is logged: the tab stays for recovery."""
        ops = self.closing(park=park)
        if not ops or self.store is None:
            return
        try:
            await asyncio.shield(self.store.write(*ops))
        except Exception:
            log.exception("could not charge the tab of turn %s", self.turn.id)


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
