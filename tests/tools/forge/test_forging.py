"""Forging through the model's tools: refusals in sentences, the trial run, versions, and
the source that mounts an owner's tools (a turn keeps the version it mounted)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from ostinato.errors import ToolArgumentsInvalid, ToolError
from ostinato.messages import tool_result_content
from ostinato.store import MemoryStore
from ostinato.tools.base import Tool, ToolContext
from ostinato.tools.forge import Limits, Sandbox
from ostinato.tools.forge.tools import forge_tools, forged_source

pytestmark = pytest.mark.asyncio(loop_scope="module")

ANN = ToolContext("conv-1", "turn-1", "run-1", "call-1", owner="ann")
BOB = ToolContext("conv-2", "turn-2", "run-2", "call-2", owner="bob")
NOBODY = ToolContext("conv-3", "turn-3", "run-3", "call-3")
SCHEMA = {
    "type": "object",
    "properties": {"celsius": {"type": "number"}},
    "required": ["celsius"],
    "additionalProperties": False,
}
C_TO_F = "(args) => ({fahrenheit: args.celsius * 9 / 5 + 32})"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def sandbox() -> AsyncIterator[Sandbox]:
    box = Sandbox(limits=Limits(cpu_s=1.0, wall_s=10.0))
    yield box
    await box.aclose()


async def call(tools: list[Tool], tool_name: str, context: ToolContext, **arguments: Any) -> Any:
    (tool,) = [t for t in tools if t.name == tool_name]
    result = await tool.run(tool.validate(arguments), context)
    json.loads(tool_result_content(result))
    return result


async def create(tools: list[Tool], context: ToolContext = ANN, **kw: Any) -> Any:
    arguments = {
        "name": "celsius_to_fahrenheit",
        "description": "Convert Celsius to Fahrenheit.",
        "parameters": SCHEMA,
        "code": C_TO_F,
        "example": {"celsius": 100},
        **kw,
    }
    return await call(tools, "create_tool", context, **arguments)


async def test_the_tools_and_how_they_are_offered(sandbox: Sandbox) -> None:
    tools = {t.name: t for t in forge_tools(MemoryStore(), sandbox)}
    assert sorted(tools) == ["create_tool", "forged_tools", "remove_tool"]
    assert (tools["create_tool"].risk, tools["create_tool"].category) == ("exec", "action")
    assert tools["remove_tool"].risk == "write" and tools["forged_tools"].risk == "safe"
    schema = tools["create_tool"].parameters
    assert set(schema["required"]) == {"name", "description", "parameters", "code"}


async def test_create_tries_stores_and_mounts_it_for_the_owner_only(sandbox: Sandbox) -> None:
    store = MemoryStore()
    tools = forge_tools(store, sandbox)
    made = await create(tools)
    assert made == {
        "created": "my_celsius_to_fahrenheit",
        "version": 1,
        "tried": {"arguments": {"celsius": 100}, "result": {"fahrenheit": 212}},
        "note": "it can be called from the next turn on",
    }
    lister = forged_source(store, sandbox).lister
    assert lister is not None
    (mine,) = await lister("ann")
    assert mine.name == "my_celsius_to_fahrenheit" and mine.risk == "safe"
    assert "version 1" in mine.description and mine.parameters == SCHEMA
    assert await mine.run(mine.validate({"celsius": 37}), ANN) == {"fahrenheit": 98.6}
    with pytest.raises(ToolArgumentsInvalid, match="celsius"):
        mine.validate({"kelvin": 3})
    assert await lister("bob") == [] and await lister(None) == []
    assert (await call(tools, "forged_tools", BOB)) == {"tools": []}
    listed = await call(tools, "forged_tools", ANN)
    assert listed["tools"] == [
        {
            "name": "my_celsius_to_fahrenheit",
            "version": 1,
            "description": "Convert Celsius to Fahrenheit.",
        }
    ]


async def test_an_edit_is_a_new_version_and_a_mounted_tool_keeps_its_own(
    sandbox: Sandbox,
) -> None:
    store = MemoryStore()
    tools = forge_tools(store, sandbox)
    await create(tools)
    lister = forged_source(store, sandbox).lister
    assert lister is not None
    (first,) = await lister("ann")  # what a running turn mounted
    edited = await create(tools, code="(a) => ({fahrenheit: Math.round(a.celsius * 1.8 + 32)})")
    assert edited["version"] == 2
    assert await first.run({"celsius": 37}, ANN) == {"fahrenheit": 98.6}  # still version 1
    (second,) = await lister("ann")  # the next turn
    assert await second.run({"celsius": 37}, ANN) == {"fahrenheit": 99}
    versions = (await call(tools, "forged_tools", ANN, name="my_celsius_to_fahrenheit"))["versions"]
    assert [(v["version"], v["code"] == C_TO_F) for v in versions] == [(1, True), (2, False)]


async def test_remove_then_it_is_not_mounted(sandbox: Sandbox) -> None:
    store = MemoryStore()
    tools = forge_tools(store, sandbox)
    await create(tools)
    removed = await call(tools, "remove_tool", ANN, name="my_celsius_to_fahrenheit")
    assert removed == {"removed": "my_celsius_to_fahrenheit", "version": 1}
    lister = forged_source(store, sandbox).lister
    assert lister is not None and await lister("ann") == []
    with pytest.raises(ToolError, match="no tool named"):
        await call(tools, "remove_tool", ANN, name="celsius_to_fahrenheit")


@pytest.mark.parametrize(
    ("change", "sentence"),
    [
        ({"name": "Bad-Name"}, "lower-case letters"),
        ({"description": "  "}, "description"),
        ({"parameters": {"type": "array"}}, '"type": "object"'),
        ({"parameters": {"type": "object", "properties": 3}}, "not a valid JSON schema"),
        ({"code": "(a) => {"}, "failed its trial run: the code threw: SyntaxError"),
        ({"code": "() => { for (;;) {} }"}, "CPU time"),
        ({"code": "(a) => a.nope.deeper"}, "failed its trial run"),
        ({"code": "'not a function'"}, "one JavaScript function expression"),
        ({"code": "() => 1 //" + "x" * 5000}, "at most 4,096"),
        ({"example": {"celsius": "hot"}}, "example does not match parameters"),
    ],
)
async def test_what_cannot_be_a_tool_is_refused_and_nothing_is_stored(
    sandbox: Sandbox, change: dict[str, Any], sentence: str
) -> None:
    store = MemoryStore()
    tools = forge_tools(store, sandbox)
    with pytest.raises(ToolError, match=sentence.replace("(", r"\(")):
        await create(tools, **change)
    assert await store.forged_tools("ann") == []


async def test_a_conversation_without_an_owner_cannot_make_tools(sandbox: Sandbox) -> None:
    tools = forge_tools(MemoryStore(), sandbox)
    with pytest.raises(ToolError, match="no owner"):
        await create(tools, NOBODY)
