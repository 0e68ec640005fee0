"""Admission control for one process: how many turns it runs at once.

A submitted message whose turn begins at once takes a slot (``Admission.carry``) and
holds it until its turn ends (or fails to begin); one stored behind its conversation's
running turn gives it back at once (a conversation runs one turn at a time). Past
``limit`` slots, a new message waits for one, in the order they came, for at most
``wait`` seconds; when ``queue`` messages already wait, or the wait runs out, it is
refused with ``Overloaded`` (HTTP 503 with ``Retry-After``) and nothing of it is
stored. While every slot is taken the process is ``busy``, and the work a turn does
after its answer (fact extraction) is skipped first.

``LoopLag`` measures how late the event loop wakes a timer: the figure of how far the
process is behind (``/healthz`` reports it).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from ostinato.errors import Unavailable

Release = Callable[[], None]


class _Submitted(Protocol):
    @property
    def started(self) -> asyncio.Future[Any]: ...
    @property
    def queued(self) -> object | None: ...


S = TypeVar("S", bound=_Submitted)


class Overloaded(Unavailable):
    code = "overloaded"


class Admission:
    """At most ``limit`` turns carried at once (``None``: no bound)."""

    def __init__(self, limit: int | None = None, wait: float = 30.0, queue: int = 4096) -> None:
        self.limit = limit
        self.wait = wait
        self.queue = queue
        self.running = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.lag = LoopLag()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def busy(self) -> bool:
        """Every slot is taken: a new turn would wait."""
        return self.limit is not None and self.running >= self.limit

    async def enter(self) -> Release:
        """A slot, once one is free; ``Overloaded`` when too many wait or the wait ends."""
        if not self.busy() and not self._waiters:
            self.running += 1
            return self._release_once()
        if len(self._waiters) >= self.queue:
            raise Overloaded(
                f"this server runs {self.running} turns and {self.waiting} wait; try again shortly",
                retry_after=self.wait,
            )
        slot: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(slot)
        try:
            await asyncio.wait_for(asyncio.shield(slot), self.wait)
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

    async def carry(self, submit: Callable[[], Awaitable[S]]) -> S:
        """``submit()`` within a slot, held until the turn it started ends; a message
        stored in its conversation's queue gives the slot back at once (its turn runs
        after the one running there, so it adds none)."""
        release = await self.enter()
        try:
            submission = await submit()
        except BaseException:
            release()
            raise
        if submission.queued is not None:
            release()
        else:
            release_when_ended(submission.started, release)
        return submission

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


def release_when_ended(started: asyncio.Future[Any], release: Release) -> None:
    """Call ``release`` when the turn behind ``started`` ends (or fails to begin)."""

    def begun(future: asyncio.Future[Any]) -> None:
        if future.cancelled() or future.exception() is not None:
            release()
            return
        task = getattr(future.result(), "task", None)
        if task is None:
            release()
        else:
            task.add_done_callback(lambda _: release())

    started.add_done_callback(begun)


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
