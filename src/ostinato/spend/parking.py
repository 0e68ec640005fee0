"""Turns' tabs kept between turns: a turn that ends leaves its tab here, and the next
turn of the same payer, model and day on this server goes on with it, drawing from what
it still has reserved, so most turns neither reserve nor close a tab (each is a
transaction, or statements in the turn's last write). A tab left alone for ``IDLE``
seconds is closed (charged and its reservation released), as is every tab a reload
leaves under the old budgets and every tab here when the server stops.

The tab's row is in the store the whole time, held by this server's lease, so what it
counted is read with the usage (``store.spend.with_tabs``) and recovery charges it when
this server is gone, as it charges a running turn's tab.

The idea is the one a connection pool has: what costs a round trip to make (here a
reservation) is kept for the next user instead of given back at once, for a while.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from time import monotonic

from ostinato.spend.limits import Budgets
from ostinato.store.spend import Hold

log = logging.getLogger("ostinato.spend")
IDLE = 30.0  # seconds a parked tab waits for the next turn before it is closed

TabKey = tuple[str, str, str, str]  # the tab's owner, agent, model and day
Close = Callable[[tuple[str, ...]], Awaitable[None]]


@dataclass(slots=True)
class Parked:
    """A tab between turns, as its last turn left it."""

    tab: Hold
    left: float  # what it reserved that no call has drawn
    under: Budgets | None  # the budgets it reserved under (None: it reserved nothing)
    blocks: int  # how many reservations it made (each next block is larger)
    budgets: Budgets | None = None  # the budgets in force when it was parked
    since: float = 0.0  # when it was parked (monotonic)


def key_of(tab: Hold) -> TabKey:
    return tab.owner, tab.agent, tab.model, tab.day


class Parking:
    """The tabs this server keeps between turns; ``close`` charges tabs by id (a store
    write of ``CloseTab``s)."""

    def __init__(self, close: Close, idle: float = IDLE) -> None:
        self._close, self.idle = close, idle
        self._tabs: dict[TabKey, Parked] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self.shut = False  # stopped: a tab that ends is closed, not parked

    def __len__(self) -> int:
        return len(self._tabs)

    def take(self, key: TabKey) -> Parked | None:
        """The tab parked for ``key``, no longer parked (one turn at a time has it)."""
        return self._tabs.pop(key, None) if self._tabs else None

    def park(self, parked: Parked) -> Hold | None:
        """Keep ``parked`` for the next turn; the tab it displaces (another turn's of the
        same key, parked first) is returned to be closed, as is ``parked``'s own once
        the parking has shut."""
        if self.shut:
            return parked.tab
        key = key_of(parked.tab)
        before = self._tabs.pop(key, None)
        parked.since = monotonic()
        self._tabs[key] = parked
        if self._timer is None:
            self._arm(self.idle)
        return before.tab if before is not None else None

    def discard(self, parked: Parked) -> None:
        """Close ``parked`` in the background (taken, but of no use to its taker)."""
        self._spawn((parked.tab.id,))

    def discard_all(self) -> None:
        """Close every parked tab in the background (a reload changed the budgets)."""
        if self._tabs:
            self._spawn(tuple(p.tab.id for p in self._tabs.values()))
            self._tabs.clear()

    async def close_all(self) -> None:
        """Close every parked tab now, and those being closed (the server stops); a tab
        that ends afterwards is closed, not parked."""
        self.shut = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        ids = tuple(p.tab.id for p in self._tabs.values())
        self._tabs.clear()
        if ids:
            await self._closed(ids)
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    def _arm(self, delay: float) -> None:
        self._timer = asyncio.get_running_loop().call_later(delay, self._expire)

    def _expire(self) -> None:
        """Close the tabs idle for ``idle`` seconds; wait again for the others."""
        self._timer = None
        now = monotonic()
        stale = [key for key, p in self._tabs.items() if now - p.since >= self.idle]
        if stale:
            self._spawn(tuple(self._tabs.pop(key).tab.id for key in stale))
        if self._tabs:
            oldest = min(p.since for p in self._tabs.values())
            self._arm(max(0.0, oldest + self.idle - now))

    def _spawn(self, ids: tuple[str, ...]) -> None:
        task = asyncio.get_running_loop().create_task(self._closed(ids))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _closed(self, ids: tuple[str, ...]) -> None:
        try:
            await self._close(ids)
        except Exception:  # the tabs stay in the store: recovery charges them
            log.exception("could not close %d parked tab(s)", len(ids))
