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

    mount = Mount([Source("mcp", lister=down), Source("b", [tool("x", "1")])])
    mounted = await mount.registry()
    assert [t.name for t in mounted.registry] == ["x"]
    failed = mount.status()[0]
    assert failed.state == "failed" and failed.error == "ConnectionError: refused"


async def test_each_source_has_a_status_and_a_failure_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    up = True

    async def flaky(owner: str | None) -> list[Tool]:
        if not up:
            raise ConnectionError("refused")
        return [tool("remote", "r")]

    mount = Mount(
        [
            Source("builtins", [tool("clock", "c")], builtin=True),
            Source("openapi:old", error="cannot load old.json: not OpenAPI 3"),
            Source("mcp:flaky", lister=flaky),
        ]
    )
    before = {s.name: s.state for s in mount.status()}
    assert before == {"builtins": "ok", "openapi:old": "failed", "mcp:flaky": "not listed yet"}
    assert "openapi:old failed" in caplog.text
    await mount.registry()
    assert [(s.state, s.tools) for s in mount.status()] == [("ok", 1), ("failed", 0), ("ok", 1)]
    caplog.clear()
    up = False
    for _ in range(3):
        mounted = await mount.registry()
        assert [t.name for t in mounted.registry] == ["clock"]
    flaky_status = mount.status()[2]
    assert flaky_status.state == "failed" and flaky_status.error == "ConnectionError: refused"
    assert flaky_status.checked_at is not None
    assert caplog.text.count("mcp:flaky failed") == 1  # logged when it starts failing
    up = True
    assert [t.name for t in (await mount.registry()).registry] == ["clock", "remote"]
    assert mount.status()[2].state == "ok" and "mcp:flaky answers again" in caplog.text
