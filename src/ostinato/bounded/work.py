"""Running input-dependent work off the event loop, under a time budget.

``off_loop`` is for work written in Python that gives the interpreter back often (a
schema check, whose keywords also watch a deadline: ``schemas``): it runs in a pool of
threads of its own, so a flood of checks queues there and never takes the loop or the
default executor's threads. ``in_process`` is for work that may hold the interpreter for
long stretches or cannot watch a clock (a PDF parser): a child process with nothing of
the server's environment, killed when its budget is spent.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ostinato.errors import InvalidRequest

# How long one schema check may take (``bounded.schemas``), here so that the loop can name
# it without importing jsonschema, which loads with the first schema compiled.
CHECK_SECONDS = 2.0

T = TypeVar("T")

THREADS = 2  # the pool's size: checks of several callers run side by side, never more
_pool: ThreadPoolExecutor | None = None


class BudgetExceeded(InvalidRequest):
    """Checking what was sent would cost more than its budget (time, size or depth)."""

    code = "budget_exceeded"


def _threads() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(THREADS, thread_name_prefix="ostinato-bounded")
    return _pool


async def off_loop(fn: Callable[..., T], *args: Any, seconds: float, what: str = "it") -> T:
    """``fn(*args)`` in the bounded pool; ``BudgetExceeded`` when it has not returned
    within ``seconds`` (its thread is left to finish: give ``fn`` a deadline of its own,
    as the schema checks have, so it stops soon after)."""
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    future = loop.run_in_executor(_threads(), call)
    try:
        return await asyncio.wait_for(future, seconds)
    except TimeoutError:
        raise BudgetExceeded(f"checking {what} took longer than its {seconds:g} s") from None


async def in_process(
    script: str, payload: bytes, *, seconds: float, memory_bytes: int, what: str
) -> Any:
    """Run the Python file ``script`` in a child process, ``payload`` on its standard
    input; it answers one JSON value on its standard output, which is returned.

    The child is isolated (``-I``: no PYTHON* variables, no user site), gets an empty
    environment (no keys or tokens), may use ``memory_bytes`` of address space (the
    script sets the limit: it is passed as its argument) and is killed when ``seconds``
    are spent (``BudgetExceeded``). A child that dies or answers nothing readable is an
    ``InvalidRequest`` naming ``what``.
    """
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        script,
        str(memory_bytes),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={},
    )
    try:
        async with asyncio.timeout(seconds):
            out, _ = await process.communicate(payload)
    except TimeoutError:
        raise BudgetExceeded(f"reading {what} took longer than its {seconds:g} s") from None
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    try:
        return json.loads(out)
    except ValueError:
        raise InvalidRequest(f"{what} could not be read (its reader stopped)") from None
