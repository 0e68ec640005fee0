"""Built-in tools for trying ostinato out: ``clock`` and ``calculator``."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ostinato.attachments import CONTEXT_KEY, extract_text
from ostinato.errors import ToolError
from ostinato.messages import FileBlock
from ostinato.tools.base import Tool, ToolContext
from ostinato.tools.calculator import CalculatorError, evaluate
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry


async def clock(timezone: str | None = None) -> dict[str, str]:
    """Tell the current date and time.

    Args:
        timezone: An IANA time zone such as "Europe/Paris"; UTC when omitted.
    """
    try:
        zone = ZoneInfo(timezone or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(
            f"unknown time zone {timezone!r}; use an IANA name such as 'Europe/Paris'"
        ) from None
    now = datetime.now(zone)
    return {
        "time": now.isoformat(timespec="seconds"),
        "timezone": str(zone),
        "weekday": now.strftime("%A"),
    }


async def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly as written.

    Args:
        expression: Numbers with + - * / // % ** and parentheses, and the functions sqrt,
            abs, round, floor, ceil, log, log10, exp, sin, cos, tan, min, max.
    """
    try:
        return f"{expression} = {evaluate(expression)}"
    except CalculatorError as exc:
        raise ToolError(str(exc)) from None


async def ask_user(question: str, options: list[str] | None = None, multiple: bool = False) -> str:
    """Ask the user a question and wait for the answer. Use it when you need a choice or
    a fact only the user has; the conversation pauses until they answer.

    Args:
        question: The question, in one or two sentences.
        options: Choices to pick from; leave out for a free-text answer.
        multiple: Whether several options may be picked.
    """
    # The loop never runs a ui tool: it pauses the turn and a person answers.
    raise ToolError("ask_user is answered by the user, not run")


async def read_attachment(name: str, context: ToolContext) -> str:
    """Read the text of a file the user attached to their message.

    Args:
        name: The file's name, as listed in the message.
    """
    files: Mapping[str, FileBlock] = context.extras.get(CONTEXT_KEY, {})
    block = files.get(name)
    if block is None:
        known = ", ".join(sorted(files)) or "none"
        raise ToolError(f"no attachment named {name!r} in this message; attached: {known}")
    return await extract_text(block)


def builtin_tools() -> list[Tool]:
    return [
        function_tool(clock, category="read"),
        function_tool(calculator, category="action"),
        function_tool(ask_user, category="ui"),
        function_tool(read_attachment, category="read", risk="safe", untrusted=True),
    ]


def default_registry(*, workdir: bool = True) -> ToolRegistry:
    """The built-in tools, the rich cards (``ostinato.tools.cards``), and (``workdir``) the
    file and shell tools jailed to each conversation's working directory."""
    from ostinato.tools.cards import card_tools
    from ostinato.tools.system import workdir_tools

    return ToolRegistry([*builtin_tools(), *card_tools(), *(workdir_tools() if workdir else [])])
