"""Mounting tool sources: order, built-ins win, duplicates refused, failures contained."""

from __future__ import annotations

import pytest

from ostinato.tools.base import Tool
from ostinato.tools.functions import function_tool
from ostinato.tools.mounting import Mount, Source


def tool(name: str, answer: str) -> Tool:
    async def run() -> str:
        """A tool."""
        return answer

    return function_tool(run, name=name)


async def test_builtins_win_and_order_is_kept() -> None:
    async def mcp(owner: str | None) -> list[Tool]:
        return [tool("clock", "shadow"), tool("remote", f"for {owner}")]

    mount = Mount(
        [
            Source("openapi", [tool("pets", "p")]),
            Source("mcp", lister=mcp),
            Source("builtins", [tool("clock", "real")], builtin=True),
        ]
    )
    mounted = await mount.registry("alice")
    assert [t.name for t in mounted.registry] == ["clock", "pets", "remote"]
    assert await mounted.registry.get("clock").run({}, None) == "real"  # type: ignore[union-attr,arg-type]
    assert mounted.shadowed == ["mcp:clock"]


def test_a_duplicate_within_one_source_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="two tools named dup"):
        Mount([Source("api", [tool("dup", "a"), tool("dup", "b")])])


async def test_a_source_that_fails_to_list_does_not_stop_the_turn() -> None:
    async def down(owner: str | None) -> list[Tool]:
        raise ConnectionError("refused")

    mounted = await Mount([Source("mcp", lister=down), Source("b", [tool("x", "1")])]).registry()
    assert [t.name for t in mounted.registry] == ["x"] and "refused" in mounted.failed[0]
