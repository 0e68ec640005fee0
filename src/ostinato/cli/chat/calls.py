"""How ``ostinato chat`` shows a tool call that waits for approval. Pure: text in, lines out.

- ``one_line``: the arguments as compact JSON for the prompt, shortened past a limit (and
  whether they were);
- ``in_full``: every argument whole, one per line; a text that spans lines, or an
  argument in ``BLOCKS`` (``create_tool``'s ``code``), as a block of its own lines, each
  after a ``│`` bar, exactly as it will be stored;
- ``shown_first``: whether a call is shown whole before it is asked about at all (it
  carries a block: the person must see the code it approves).
"""

from __future__ import annotations

import json

from ostinato.messages import JSON

PROMPT_LIMIT = 120
BLOCKS = frozenset({"code"})  # arguments always shown whole, as blocks of lines
BAR = "  │ "


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def one_line(arguments: JSON, limit: int = PROMPT_LIMIT) -> tuple[str, bool]:
    """The arguments on one line, at most ``limit`` characters; whether they were cut."""
    text = " ".join(_compact(arguments).split())
    if len(text) <= limit:
        return text, False
    return text[: limit - 1] + "…", True


def _is_block(name: str, value: object) -> bool:
    return isinstance(value, str) and (name in BLOCKS or "\n" in value)


def shown_first(arguments: JSON) -> bool:
    """Whether the call is shown whole before it is asked about (it carries a block)."""
    return any(_is_block(name, value) for name, value in arguments.items())


def in_full(tool: str, arguments: JSON, risk: str) -> list[str]:
    """Every argument of the call, whole."""
    lines = [f"{tool} asks to run with ({risk}):"]
    for name, value in arguments.items():
        if _is_block(name, value):
            assert isinstance(value, str)
            lines.append(f"  {name}:")
            lines.extend(BAR + line for line in value.split("\n"))
            continue
        shown = json.dumps(value, ensure_ascii=False, indent=2).split("\n")
        lines.append(f"  {name}: {shown[0]}")
        lines.extend("  " + line for line in shown[1:])
    if not arguments:
        lines.append("  (no arguments)")
    return lines
