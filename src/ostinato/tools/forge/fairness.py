"""Sharing the sandbox's workers fairly between owners.

``FairSlots`` hands out the workers: each owner holds at most ``per_owner`` at once, and a
freed worker goes to the owner that has waited longest among those under their bound,
not to the next run in arrival order. So one owner's flood of runs holds at most
``per_owner`` workers, and another owner's run waits at most for one run to end (its
wall-time budget). ``RunRate`` bounds each owner's runs a minute.

Both count in this process (a server's sandbox is its own); a forged tool's trial run
(``POST /v1/tools/forged``) counts like a call.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import AsyncIterator

from ostinato.tools.forge.limits import SandboxError

ANYONE = ""  # runs no owner asked for (a library's own calls): bound by the total only


class FairSlots:
    def __init__(self, total: int, per_owner: int) -> None:
        self.total, self.per_owner = total, max(1, per_owner)
        self._busy: collections.Counter[str] = collections.Counter()
        self._waiting: dict[str, collections.deque[asyncio.Future[None]]] = {}

    @contextlib.asynccontextmanager
    async def slot(self, owner: str | None) -> AsyncIterator[None]:
        who = owner or ANYONE
        if not self._free_for(who):
            turn = asyncio.get_running_loop().create_future()
            self._waiting.setdefault(who, collections.deque()).append(turn)
            try:
                await turn
            except BaseException:
                if turn.done() and not turn.cancelled():  # handed a slot it will not use
                    self._release(who)
                else:
                    self._forget(who, turn)
                raise
        else:
            self._busy[who] += 1
        try:
            yield
        finally:
            self._release(who)

    def _bound(self, who: str) -> int:
        return self.total if who == ANYONE else self.per_owner

    def _free_for(self, who: str) -> bool:
        return (
            sum(self._busy.values()) < self.total
            and self._busy[who] < self._bound(who)
            and not self._waiting.get(who)
        )

    def _release(self, who: str) -> None:
        self._busy[who] -= 1
        if self._busy[who] <= 0:
            del self._busy[who]
        self._hand_on()

    def _hand_on(self) -> None:
        """Give free workers to the owners waiting longest that are under their bound
        (the dict keeps owners in the order they began to wait; one served goes last)."""
        while sum(self._busy.values()) < self.total:
            chosen = next(
                (w for w, q in self._waiting.items() if q and self._busy[w] < self._bound(w)),
                None,
            )
            if chosen is None:
                return
            queue = self._waiting.pop(chosen)
            turn = queue.popleft()
            if queue:
                self._waiting[chosen] = queue  # to the back of the line
            self._busy[chosen] += 1
            turn.set_result(None)

    def _forget(self, who: str, turn: asyncio.Future[None]) -> None:
        queue = self._waiting.get(who)
        if queue is not None and turn in queue:
            queue.remove(turn)
            if not queue:
                del self._waiting[who]


class RunRate:
    """At most ``per_minute`` runs of one owner in any 60 s (0: no bound; runs of no
    owner, a library's own, are not counted)."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._runs: dict[str, collections.deque[float]] = {}

    def count(self, owner: str | None) -> None:
        """Count one more run of ``owner``; ``SandboxError`` (limit ``rate``) past it."""
        if self.per_minute <= 0 or owner is None:
            return
        now = time.monotonic()
        runs = self._runs.setdefault(owner or ANYONE, collections.deque())
        while runs and now - runs[0] >= 60.0:
            runs.popleft()
        if len(runs) >= self.per_minute:
            wait = 60.0 - (now - runs[0])
            raise SandboxError(
                f"too many runs of your tools: at most {self.per_minute} a minute; "
                f"try again in {wait:.0f} s",
                "rate",
            )
        runs.append(now)
