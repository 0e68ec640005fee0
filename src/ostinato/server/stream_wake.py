"""What a stream waits on between frames (``server.streams``): a ``Bell`` that whatever
may end the wait rings, and the ``Silence`` that rings it when nothing was said for a
while (a ping is due)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Bell:
    """What a stream waits on between frames: one future at a time, made when it waits
    and done by the first ``ring`` (a ring while it is not waiting is not kept: it looks
    at everything before it waits again)."""

    __slots__ = ("_future", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._future: asyncio.Future[None] | None = None

    def ring(self, *_: object) -> None:
        future = self._future
        if future is not None and not future.done():
            future.set_result(None)

    async def wait(self) -> None:
        self._future = self._loop.create_future()
        try:
            await self._future
        finally:
            self._future = None


def _nothing() -> None:
    return None


class Silence:
    """Whether ``seconds`` passed with nothing ``heard`` (``over``; ``ring`` is called
    then): one timer for the stream, moved on lazily (``heard`` notes the time; the timer,
    when it fires early, waits the rest), where a timeout on every wait made and
    cancelled a timer per frame."""

    def __init__(self, seconds: float, ring: Callable[[], None] = _nothing) -> None:
        self._loop = asyncio.get_running_loop()
        self._seconds = seconds
        self._ring = ring
        self._until = self._loop.time() + seconds
        self.over = False
        self._timer: asyncio.TimerHandle | None = self._loop.call_at(self._until, self._check)

    def heard(self) -> None:
        """Something was said: the silence starts again (and one that was over, anew)."""
        self._until = self._loop.time() + self._seconds
        if self.over:
            self.over = False
            self._timer = self._loop.call_at(self._until, self._check)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        if self._loop.time() < self._until:
            self._timer = self._loop.call_at(self._until, self._check)
            return
        self._timer = None
        self.over = True
        self._ring()
