"""A write in flight when its caller is cancelled: the store says what it wrote.

A store commits a write it was given whatever becomes of the caller (SQLite's writer,
PostgreSQL's grouped writer: the statements are sent, or queued to be). So that a
cancelled caller can still follow what was written (a turn's record answers exactly
the calls still open: issue 24), ``Store.write`` cancelled while its write is in flight
waits for that write's outcome, then raises the ``asyncio.CancelledError``: carrying
the write's results if it committed (``written``), or plain if nothing was written.
``MemoryStore.write`` never suspends, so a cancel never lands inside it.

The error is a plain ``asyncio.CancelledError`` with the results on it, not a subclass:
Python 3.11's ``asyncio.timeout`` and ``TaskGroup`` recognise a cancel by its exact type,
so a subclass would turn a tool's timeout that fell during a write into a cancel.

The wait costs a write nothing unless a cancel comes: the caller awaits the writer's
own future (``InFlight``), and the writer keeps the outcome of a write whose caller was
cancelled for it (no task, no shield, no extra pass of the event loop per write).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, NoReturn, TypeAlias

Outcome: TypeAlias = "list[Any] | BaseException"
_PENDING: Any = object()


def cancelled_after(written: Any) -> asyncio.CancelledError:
    """The cancel of a caller whose write committed, carrying what it wrote."""
    error = asyncio.CancelledError("cancelled while its write was in flight; it committed")
    error.written = written  # type: ignore[attr-defined]
    return error


def written(error: BaseException) -> Any:
    """What the write a cancel fell during committed (``None``: nothing, or not known)."""
    return getattr(error, "written", None)


class InFlight:
    """One write handed to a writer: the future its caller awaits (``wait``), and the
    writer's ``settle`` of it, which keeps the outcome for a caller cancelled meanwhile
    (the future is then cancelled and cannot take it)."""

    __slots__ = ("_late", "_outcome", "future")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.future: asyncio.Future[list[Any]] = loop.create_future()
        self._outcome: Outcome = _PENDING
        self._late: asyncio.Future[None] | None = None

    def settle(self, outcome: Outcome) -> None:
        """The write's outcome (its results, or the error that kept it from committing)."""
        self._outcome = outcome  # kept for a caller cancelled meanwhile
        future = self.future
        if not future.done():
            if isinstance(outcome, asyncio.CancelledError):
                future.cancel()
            elif isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
        elif self._late is not None and not self._late.done():
            self._late.set_result(None)

    async def wait(self) -> list[Any]:
        """The write's results; if the caller is cancelled first, its outcome is waited
        for and the cancel raised, carrying the results if it committed."""
        try:
            return await self.future
        except asyncio.CancelledError:
            await self.cancelled()

    async def cancelled(self) -> NoReturn:
        """``wait``'s end when the caller's await of ``future`` raised its cancel (a
        writer may await ``future`` itself and call this then: a coroutine less a
        write): the outcome is waited for, and the cancel raised, carrying the results
        if the write committed."""
        if not self.future.cancelled():  # the outcome came, then the cancel
            self._outcome = self.future.exception() or self.future.result()
        while self._outcome is _PENDING:
            self._late = self.future.get_loop().create_future()
            with contextlib.suppress(asyncio.CancelledError):
                await self._late
        if isinstance(self._outcome, BaseException):
            raise asyncio.CancelledError from self._outcome  # nothing was written
        raise cancelled_after(self._outcome)


def settle_in_task(work: Awaitable[list[Any]]) -> InFlight:
    """``work`` (a write that is not handed to a writer) run as a task of its own, its
    outcome settling an ``InFlight``: so a cancel of the caller does not cut it short."""
    inflight = InFlight(asyncio.get_running_loop())
    task = asyncio.ensure_future(work)

    def done(task: asyncio.Future[list[Any]]) -> None:
        if task.cancelled():
            inflight.settle(asyncio.CancelledError())
        else:
            inflight.settle(task.exception() or task.result())

    task.add_done_callback(done)
    return inflight
