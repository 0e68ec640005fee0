"""Tools from Python functions: schema from hints and docstring, validation, running."""

from __future__ import annotations

import threading
from typing import Literal

import pytest

from ostinato.errors import ToolArgumentsInvalid
from ostinato.tools.base import ToolContext
from ostinato.tools.functions import function_tool, parse_docstring
from ostinato.tools.registry import ToolRegistry

CONTEXT = ToolContext("conv", "turn", "run", "call")


def search(query: str, limit: int = 5, mode: Literal["fast", "exact"] = "fast") -> list[str]:
    """Search the catalogue.

    Args:
        query: What to look for.
        limit: How many results at most,
            counted after de-duplication.
        mode: The search mode.

    Returns:
        The matching names.
    """
    return [query] * limit


def test_schema_from_hints_and_docstring() -> None:
    tool = function_tool(search)
    assert tool.name == "search" and tool.description == "Search the catalogue."
    props = tool.parameters["properties"]
    assert tool.parameters["required"] == ["query"]
    assert props["query"] == {"type": "string", "description": "What to look for."}
    assert props["limit"]["default"] == 5 and props["limit"]["type"] == "integer"
    assert (
        props["limit"]["description"] == "How many results at most, counted after de-duplication."
    )
    assert props["mode"]["enum"] == ["fast", "exact"]
    assert tool.parameters["additionalProperties"] is False


def test_validation_rejects_before_the_function_runs() -> None:
    tool = function_tool(search)
    assert tool.validate({"query": "x"}) == {"query": "x", "limit": 5, "mode": "fast"}
    for bad in ({}, {"query": 1}, {"query": "x", "mode": "slow"}, {"query": "x", "extra": 1}):
        with pytest.raises(ToolArgumentsInvalid):
            tool.validate(bad)


async def test_sync_functions_run_off_the_event_loop() -> None:
    seen: list[str] = []

    def where() -> str:
        """Which thread."""
        seen.append(threading.current_thread().name)
        return "ok"

    tool = function_tool(where)
    assert await tool.run({}, CONTEXT) == "ok"
    assert seen[0] != threading.main_thread().name


async def test_async_functions_and_the_context_parameter() -> None:
    async def who(context: ToolContext, greeting: str = "hi") -> str:
        """Greets the conversation."""
        return f"{greeting} {context.conversation_id}"

    tool = function_tool(who)
    assert "context" not in tool.parameters["properties"]
    assert await tool.run(tool.validate({}), CONTEXT) == "hi conv"


def test_registry_refuses_duplicates_and_decorates() -> None:
    registry = ToolRegistry()

    @registry.tool(category="read")
    def lookup(key: str) -> str:
        """Look a key up."""
        return key

    assert registry.get("lookup").category == "read"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="already registered"):
        registry.add(function_tool(lookup))


def test_catalog_tells_apart_unknown_withheld_switched_off_and_unavailable() -> None:
    registry = ToolRegistry(
        [
            function_tool(search),
            function_tool(lambda: "x", name="hidden", description="d"),
            function_tool(lambda: "y", name="down", description="d", available=lambda: False),
            function_tool(lambda: "z", name="muted", description="d"),
            function_tool(lambda: "w", name="kept", description="d"),
        ]
    )
    catalog = registry.catalog(
        allow=["search", "down", "muted", "kept"], disabled=["muted", "kept"], protected=["kept"]
    )
    assert [t.name for t in catalog.tools] == ["search", "kept"]  # protected stays on
    messages = {name: str(catalog.lookup(name)) for name in ("hidden", "muted", "down", "ghost")}
    assert "not allowed for this skill" in messages["hidden"]
    assert "switched off by the user" in messages["muted"]
    assert "not available right now" in messages["down"]
    assert "no tool named 'ghost'" in messages["ghost"] and "search" in messages["ghost"]
    assert len(set(messages.values())) == 4


def test_docstring_parser_handles_no_args_section() -> None:
    assert parse_docstring("Just a line.") == ("Just a line.", {})
    assert parse_docstring(None) == ("", {})


def test_a_tool_of_ones_own_can_be_marked_untrusted_or_memory_writing() -> None:
    def weather(city: str) -> str:
        """Today's weather.

        Args:
            city: The city.
        """
        return "sunny"

    plain = function_tool(weather)
    assert (plain.untrusted, plain.writes_memory) == (False, False)
    marked = function_tool(weather, risk="network", untrusted=True)
    assert (marked.untrusted, marked.writes_memory) == (True, False)
    assert function_tool(weather, writes_memory=True).writes_memory
