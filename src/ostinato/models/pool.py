"""A bound on one provider's model calls at once, per process.

Every model made for one provider endpoint (its provider and base URL) shares one
``RequestPool`` per event loop: at most ``limit`` of its calls stream at once, and the
next waits, in the order they came, until one ends. A slow or stalled provider then ties
up at most ``limit`` calls and their connections, never every turn in the process, and
a local model server that answers one request at a time is not sent hundreds (they wait
here, where a cancel reaches them at once, instead of in the server's own queue).

A call holds its place for its whole stream, retries included; the wait counts toward the
call's deadline like the rest of it (``loop.calling``). ``models.max_requests`` sets the
limit (``0``: no bound).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from ostinato.models.base import Model, ModelEvent, ModelRequest

DEFAULT_MAX_REQUESTS = 1024  # the default server.max_turns: no bound below the turns' own

_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, int], RequestPool]] = (
    weakref.WeakKeyDictionary()
)


class RequestPool:
    """At most ``limit`` calls at once to one provider endpoint."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._free = asyncio.Semaphore(limit)
        self.running = 0
        self.waiting = 0

    async def stream(self, model: Model, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        """``model.stream(request)`` once a place is free; the place is given back when
        the stream ends, fails or is closed."""
        self.waiting += 1
        try:
            await self._free.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        try:
            events = model.stream(request)
            async with aclosing(events):
                async for event in events:
                    yield event
        finally:
            self.running -= 1
            self._free.release()


class Pooled:
    """A model whose calls go through its endpoint's ``RequestPool`` (found in the event
    loop the call runs in)."""

    def __init__(self, model: Model, endpoint: str, limit: int) -> None:
        self.inner = model
        self.endpoint = endpoint
        self.limit = limit
        self.name = model.name

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        return pool_for(self.endpoint, self.limit).stream(self.inner, request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # the adapter's own (its wire encoding, client)


def pool_for(endpoint: str, limit: int) -> RequestPool:
    """The running event loop's pool for ``endpoint``."""
    pools = _POOLS.setdefault(asyncio.get_running_loop(), {})
    pool = pools.get((endpoint, limit))
    if pool is None:
        pool = pools[(endpoint, limit)] = RequestPool(limit)
    return pool


def pooled(model: Model, endpoint: str, limit: int) -> Model:
    """``model`` bound by the pool of ``endpoint`` (shared by every model of it in the
    event loop its calls run in); ``model`` itself when ``limit`` is 0."""
    return model if limit <= 0 else Pooled(model, endpoint, limit)
