"""The built-in tools: calculator (no eval) and clock."""

from __future__ import annotations

import pytest

from ostinato.errors import ToolError
from ostinato.tools.base import ToolContext
from ostinato.tools.builtins import calculator, clock
from ostinato.tools.calculator import CalculatorError, evaluate


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2*(3+4)", 14),
        ("7/2", 3.5),
        ("7//2", 3),
        ("-3**2", -9),
        ("2**10", 1024),
        ("sqrt(16)", 4),
        ("max(1, 5, 3)", 5),
        ("pi*0", 0),
        ("10 % 4", 2),
        ("1e3+1", 1001),
    ],
)
def test_arithmetic(expression: str, value: float) -> None:
    assert evaluate(expression) == value


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("__import__('os').system('true')", "unsupported"),
        ("open('/etc/passwd')", "unsupported"),
        ("(1).__class__", "unsupported"),
        ("x + 1", "unsupported"),
        ("1/0", "division by zero"),
        ("9**99999", "exponents"),
        ("2 +", "not an arithmetic expression"),
        ("True + 1", "unsupported"),
        ("1" * 600, "longer than"),
    ],
)
def test_refuses_anything_but_arithmetic(expression: str, words: str) -> None:
    with pytest.raises(CalculatorError, match=words):
        evaluate(expression)


async def test_tool_wrappers() -> None:
    assert await calculator("2*(3+4)") == "2*(3+4) = 14"
    with pytest.raises(ToolError):
        await calculator("import os")
    now = await clock("Asia/Tokyo")
    assert now["timezone"] == "Asia/Tokyo" and now["time"].endswith("+09:00")
    assert (await clock())["timezone"] == "UTC"
    with pytest.raises(ToolError, match="IANA"):
        await clock("Mars/Olympus")
    assert ToolContext  # the builtins need no context
