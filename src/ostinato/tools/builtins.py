"""Built-in tools for trying ostinato out: ``clock`` and ``calculator``."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ostinato.errors import ToolError
from ostinato.tools.base import Tool, ToolRegistry
from ostinato.tools.calculator import CalculatorError, evaluate
from ostinato.tools.functions import function_tool


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


def builtin_tools() -> list[Tool]:
    return [
        function_tool(clock, category="read"),
        function_tool(calculator, category="action"),
    ]


def default_registry() -> ToolRegistry:
    """A registry holding the built-in tools."""
    return ToolRegistry(builtin_tools())
