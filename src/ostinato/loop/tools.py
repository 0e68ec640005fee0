"""Running one tool call: look it up, validate, run under its deadline. Never raises
(except on cancellation): every failure becomes an error result the model sees."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ostinato import observe
from ostinato.approvals import Ending, refusal
from ostinato.bounded import off_loop
from ostinato.bounded.work import CHECK_SECONDS
from ostinato.errors import InvalidRequest, ToolArgumentsInvalid, ToolError
from ostinato.frames import ToolFinished
from ostinato.identity.owners import is_anonymous
from ostinato.messages import JSON, ToolUseBlock, tool_result_content
from ostinato.store.base import ToolCallStatus, Turn
from ostinato.tools.base import Tool, ToolContext
from ostinato.tools.registry import ToolCatalog


@dataclass(slots=True)
class ToolRun:
    call: ToolUseBlock
    content: str
    duration_s: float
    error: str | None = None
    status: ToolCallStatus = "ok"
    recorded: bool = False  # its finish has been written to the store

    def finished_frame(self, run_id: str, seq: int) -> ToolFinished:
        return ToolFinished(
            run_id=run_id,
            seq=seq,
            tool_use_id=self.call.id,
            name=self.call.name,
            status=self.status,
            duration_s=round(self.duration_s, 6),
            result=self.content if len(self.content) <= 2000 else self.content[:2000] + "…",
        )


class Consent(Protocol):
    """Asks a person before a tool whose risk needs consent runs (``ostinato.consent``)."""

    def required(self, tool: Tool) -> bool: ...

    def took_in(self, tool: Tool) -> None:
        """The tool ran: its result is part of the turn from now on."""
        ...

    async def ask(
        self, turn: Turn, call: ToolUseBlock, tool: Tool, *, owner: str | None, seq: int
    ) -> Ending: ...


def _asks(consent: Consent, tool: Tool, arguments: JSON) -> bool:
    """Whether this call needs a person's consent: never for a call that changes nothing
    (``Tool.changes``), else as the policy says for the tool."""
    if tool.changes is not None and not tool.changes(arguments):
        return False
    return consent.required(tool)


async def validated(tool: Tool, arguments: JSON) -> JSON:
    """``tool.validate(arguments)``; a check against a schema from outside
    (``Tool.bounded_check``) runs off the event loop under its budget
    (``ostinato.bounded``). ``ToolError`` when the arguments do not pass."""
    if not tool.bounded_check:
        return tool.validate(arguments)
    try:
        return await off_loop(
            tool.validate, arguments, seconds=CHECK_SECONDS + 1, what="the arguments"
        )
    except InvalidRequest as exc:  # over its budget
        raise ToolArgumentsInvalid(exc.message) from None


async def run_tool(
    call: ToolUseBlock,
    catalog: ToolCatalog,
    turn: Turn,
    *,
    consent: Consent | None = None,
    owner: str | None = None,
    workdir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    waiting: Callable[[bool], None] | None = None,
    seq: int = 0,
    extras: dict[str, Any] | None = None,
    cut_short: Callable[[str], None] | None = None,
) -> ToolRun:
    """Run one call. ``waiting`` is told True when the call starts waiting for a person's
    consent, and False when that wait ends; ``cut_short`` what the tool had done when it
    was cancelled (``ToolContext.cut_short``)."""
    started = time.perf_counter()

    def failed(message: str, status: ToolCallStatus = "error") -> ToolRun:
        return ToolRun(call, message, time.perf_counter() - started, message, status)

    found = catalog.lookup(call.name)
    if isinstance(found, str):
        return failed(found)
    tool = found
    if tool.account_only and is_anonymous(owner):  # it stays offered: the model can say so
        return failed(f"sign in to use {tool.name}")
    try:
        arguments = await validated(tool, call.input)
    except ToolError as exc:
        return failed(exc.message)
    if consent is not None and _asks(consent, tool, arguments):
        ending = await _await_consent(consent, turn, call, tool, owner, seq, waiting)
        if ending is not Ending.APPROVED:
            return failed(refusal(ending, tool.name), "refused")
    context = ToolContext(
        turn.conversation_id,
        turn.id,
        turn.run_id,
        call.id,
        owner=owner,
        workdir=workdir,
        progress=progress,
        extras=extras if extras is not None else {},
        cut_short=cut_short,
    )
    try:
        return await _execute(call, tool, arguments, context)
    finally:
        if consent is not None:
            consent.took_in(tool)


async def _execute(
    call: ToolUseBlock, tool: Tool, arguments: JSON, context: ToolContext
) -> ToolRun:
    """Run the tool under its deadline; every failure becomes an error result."""
    started = time.perf_counter()

    def failed(message: str, status: ToolCallStatus = "error") -> ToolRun:
        return ToolRun(call, message, time.perf_counter() - started, message, status)

    deadline = asyncio.timeout(tool.timeout)
    try:
        async with deadline:
            value = await tool.run(arguments, context)
    except TimeoutError as exc:
        if not deadline.expired():
            return failed(f"the tool {tool.name!r} failed: TimeoutError: {exc}")
        return failed(f"the tool {tool.name!r} passed its {tool.timeout:g} s deadline", "timeout")
    except ToolError as exc:
        return failed(exc.message)
    except Exception as exc:  # a tool never crashes the turn
        return failed(f"the tool {tool.name!r} failed: {type(exc).__name__}: {exc}")
    return ToolRun(call, tool_result_content(value), time.perf_counter() - started)


async def _await_consent(
    consent: Consent,
    turn: Turn,
    call: ToolUseBlock,
    tool: Tool,
    owner: str | None,
    seq: int,
    waiting: Callable[[bool], None] | None,
) -> Ending:
    """Ask the person, telling ``waiting`` when the wait begins and when it ends."""
    if waiting is not None:
        waiting(True)
    try:
        with observe.approval(tool.name) as watch:
            ending = await consent.ask(turn, call, tool, owner=owner, seq=seq)
            watch.ending(ending.value)
    finally:
        if waiting is not None:
            waiting(False)
    return ending
