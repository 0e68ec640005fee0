"""Admission control for one process: how many turns it runs at once.

A slot is one busy conversation: its worker (``turns.Worker``) holds one from its first
turn until it winds down, whatever kind of turn it runs (a message, a card's answer, a
decision's continuation, what recovery took over), so at most ``limit`` turns run at
once. A message stored behind its conversation's running turn needs none (its worker
holds one). Past ``limit``, a message or a card's answer that would start a worker waits
for a slot, in the order they came, for at most ``wait`` seconds; when ``queue`` already
wait, or the wait runs out, it is refused with ``Overloaded`` (HTTP 503 with
``Retry-After``) and nothing of it is stored. Work whose input is stored already (a
decision's continuation, a queued message another server left, recovery) waits in the
same line with no bound (``bounded=False``): it is never refused. While every slot is
taken the process is ``busy``, and the work a turn does after its answer (fact
extraction) is skipped first. (Compaction is not shed: it is what lets a long history's
request fit the model's window at all.)

Beginning a turn (its conversation and history read, its first rows written and
committed) is the costly part of it; streaming its reply costs little a token. With
``starts`` set, at most that many turns are being begun at once (``beginning``) and the
rest wait their turn in order: a burst of new messages then begins a few at a time,
between the token writes of the streams already running, instead of all at once, which
holds up every running stream and gets no new one to its first token sooner. (The same
idea as a server's bounded accept backlog, or an inference server that schedules a few
prefills between decode steps: the work that delays everyone runs in small batches.)

``LoopLag`` measures how late the event loop wakes a timer: the figure of how far the
process is behind (``/healthz`` reports it).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext

from ostinato.errors import Unavailable

Release = Callable[[], None]


class Overloaded(Unavailable):
    code = "overloaded"


class Held:
    """A slot (or none) in someone's hands: ``hand`` passes it on (to a worker, which
    gives it back when it winds down), ``release`` gives it back unless it was passed."""

    __slots__ = ("_release",)

    def __init__(self, release: Release | None = None) -> None:
        self._release = release

    def hand(self) -> Release | None:
        release, self._release = self._release, None
        return release

    def release(self) -> None:
        release = self.hand()
        if release is not None:
            release()


class Admission:
    """At most ``limit`` turns carried at once, and at most ``starts`` of them being begun
    at once (``None``: no bound)."""

    def __init__(
        self,
        limit: int | None = None,
        wait: float = 30.0,
        queue: int = 4096,
        starts: int | None = None,
    ) -> None:
        self.limit = limit
        self.wait = wait
        self.queue = queue
        self.running = 0
        self.starting = 0  # turns being begun now (``beginning``)
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._starts = asyncio.Semaphore(starts) if starts is not None else None
        self.lag = LoopLag()

    @asynccontextmanager
    async def beginning(self) -> AsyncIterator[None]:
        """Hold one of the ``starts`` places while a turn is begun (waiting, in order,
        for one to come free)."""
        places: AbstractAsyncContextManager[object] = self._starts or nullcontext()
        async with places:
            self.starting += 1
            try:
                yield
            finally:
                self.starting -= 1

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def busy(self) -> bool:
        """Every slot is taken: a new turn would wait."""
        return self.limit is not None and self.running >= self.limit

    def would_wait(self) -> bool:
        """A new slot would not be had at once (every one is taken, or others wait)."""
        return self.busy() or bool(self._waiters)

    async def enter(self, *, bounded: bool = True) -> Release:
        """A slot, once one is free; ``Overloaded`` when too many wait or the wait ends
        (``bounded=False``: wait as long as it takes, never refused)."""
        if not self.busy() and not self._waiters:
            self.running += 1
            return self._release_once()
        if bounded and len(self._waiters) >= self.queue:
            raise Overloaded(
                f"this server runs {self.running} turns and {self.waiting} wait; try again shortly",
                retry_after=self.wait,
            )
        slot: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(slot)
        try:
            await asyncio.wait_for(asyncio.shield(slot), self.wait if bounded else None)
        except TimeoutError:
            if not self._give_up(slot):
                return self._release_once()  # a slot came just as the wait ended
            raise Overloaded(
                f"no turn slot came free within {self.wait:g} s; try again shortly",
                retry_after=self.wait,
            ) from None
        except asyncio.CancelledError:
            if not self._give_up(slot):
                self._release()
            raise
        return self._release_once()

    def _give_up(self, slot: asyncio.Future[None]) -> bool:
        """Stop waiting; False when the slot had been handed over already."""
        if slot.done() and not slot.cancelled():
            return False
        slot.cancel()
        self._waiters.remove(slot)
        return True

    def _release_once(self) -> Release:
        done = False

        def release() -> None:
            nonlocal done
            if not done:
                done = True
                self._release()

        return release

    def _release(self) -> None:
        """Hand the slot to the first who waits, or free it."""
        while self._waiters:
            slot = self._waiters.popleft()
            if not slot.done():
                slot.set_result(None)  # the slot passes on: running stays the same
                return
        self.running -= 1


class LoopLag:
    """How late the loop runs a timer set ``interval`` seconds ahead (the latest figure
    and the largest since the last ``take_max``)."""

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        self.last = 0.0
        self.peak = 0.0

    def note(self, lag: float) -> None:
        self.last = max(0.0, lag)
        self.peak = max(self.peak, self.last)

    def take_max(self) -> float:
        peak, self.peak = self.peak, self.last
        return peak

    async def watch(self) -> None:
        """Measure until cancelled."""
        while True:
            began = time.monotonic()
            await asyncio.sleep(self.interval)
            self.note(time.monotonic() - began - self.interval)
