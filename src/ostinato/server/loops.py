"""The event loop ``ostinato serve`` runs on (``server.loop``).

``auto`` takes uvloop (libuv's loop, written in C) when it is installed, as uvicorn's own
``--loop auto`` does; uvloop is one of ostinato's dependencies (and uvicorn[standard]'s)
on the platforms it builds for. Its scheduling, timers and socket transports cost less
CPU than asyncio's, which are Python (docs/performance.md, "Round five"). ``asyncio``
keeps Python's own loop, e.g. to rule the loop out while looking into a fault.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable
from typing import Literal

LoopChoice = Literal["auto", "uvloop", "asyncio"]
LoopFactory = Callable[[], asyncio.AbstractEventLoop]


class LoopUnavailable(Exception):
    """``server.loop = "uvloop"`` where uvloop is not installed."""


def loop_factory(choice: LoopChoice) -> LoopFactory | None:
    """What makes the loop ``choice`` asks for; None: asyncio's own (its default)."""
    if choice == "asyncio":
        return None
    if importlib.util.find_spec("uvloop") is None:
        if choice == "uvloop":
            raise LoopUnavailable(
                "server.loop is 'uvloop' but uvloop is not installed "
                "(pip install uvloop, or set server.loop to 'auto' or 'asyncio')"
            )
        return None
    import uvloop

    factory: LoopFactory = uvloop.new_event_loop
    return factory


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """``uvloop`` or ``asyncio``: whose loop ``loop`` is."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"
