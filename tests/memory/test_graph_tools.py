"""relate_memories, memory_graph and memory_conflicts through a ToolContext, on every engine:
relations, neighbourhoods with history, relation-aware conflicts, resolving one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ostinato.errors import ToolError
from ostinato.memory import Memory, memory_tools
from ostinato.messages import tool_result_content
from ostinato.store import Store
from ostinato.tools.base import Tool, ToolContext

ANN = ToolContext("conv-1", "turn-1", "run-1", "call-1", owner="ann")
BOB = ToolContext("conv-3", "turn-3", "run-3", "call-3", owner="bob")


async def call(tools: list[Tool], name: str, context: ToolContext, **arguments: Any) -> Any:
    (tool,) = [t for t in tools if t.name == name]
    result = await tool.run(tool.validate(arguments), context)
    json.loads(tool_result_content(result))  # what the model reads is JSON
    return result


async def fact(tools: list[Tool], text: str, **kw: Any) -> str:
    made = await call(tools, "remember", ANN, fact=text, **kw)
    return str(made["remembered"])


async def test_facts_relate_and_the_graph_shows_the_neighbourhood(store: Store) -> None:
    tools = memory_tools(store)
    maya = await fact(tools, "Ann's daughter is Maya")
    born = await fact(tools, "Maya was born on 3 May 2019", subject="birthday")
    school = await fact(tools, "Maya goes to Escola Azul")
    made = await call(
        tools, "relate_memories", ANN, memory_id=born, relation="about", other_id=maya
    )
    assert made == {"related": {"from": born, "relation": "about", "to": maya}}
    await call(tools, "relate_memories", ANN, memory_id=school, relation="part_of", other_id=maya)
    # The school moves: the new fact replaces the old one, which stays as history.
    moved = await fact(tools, "Maya goes to Escola Verde", supersedes=school)

    near = await call(tools, "memory_graph", ANN, memory_id=maya)
    assert near["center"] == maya
    assert [m["id"] for m in near["memories"]] == [maya, born, school]
    assert "closed" in near["memories"][2]
    assert {(e["from"], e["relation"], e["to"]) for e in near["links"]} == {
        (born, "about", maya),
        (school, "part_of", maya),
    }
    far = await call(tools, "memory_graph", ANN, memory_id=maya, depth=2)
    assert moved in [m["id"] for m in far["memories"]]
    assert {"from": moved, "relation": "supersedes", "to": school} in far["links"]


async def test_graph_tools_refuse_in_sentences(store: Store) -> None:
    tools = memory_tools(store)
    a = await fact(tools, "fact a")
    b = await fact(tools, "fact b")
    with pytest.raises(ToolError, match="no memory"):
        await call(tools, "memory_graph", BOB, memory_id=a)  # another owner's fact
    with pytest.raises(ToolError, match="no memory"):
        await call(tools, "relate_memories", BOB, memory_id=a, relation="about", other_id=b)
    with pytest.raises(ToolError, match="itself"):
        await call(tools, "relate_memories", ANN, memory_id=a, relation="about", other_id=a)
    await call(tools, "forget", ANN, memory_id=b)
    with pytest.raises(ToolError, match="closed"):
        await call(tools, "relate_memories", ANN, memory_id=a, relation="about", other_id=b)


async def test_conflicts_tell_apart_facts_about_different_things(store: Store) -> None:
    tools = memory_tools(store)
    maya = await fact(tools, "Ann's daughter is Maya")
    leo = await fact(tools, "Ann's son is Leo")
    maya_3 = await fact(tools, "born on 3 May 2019", subject="birthday")
    maya_5 = await fact(tools, "born on 5 May 2019", subject="birthday")
    leo_9 = await fact(tools, "born on 9 June 2021", subject="birthday")
    for source, target in ((maya_3, maya), (maya_5, maya), (leo_9, leo)):
        await call(
            tools, "relate_memories", ANN, memory_id=source, relation="about", other_id=target
        )
    (conflict,) = (await call(tools, "memory_conflicts", ANN))["conflicts"]
    assert (conflict["subject"], conflict["relation"], conflict["to"]) == (
        "birthday",
        "about",
        maya,
    )
    assert [m["id"] for m in conflict["memories"]] == [maya_3, maya_5]

    resolved = await call(tools, "memory_conflicts", ANN, resolve=maya_5)
    assert resolved["kept"] == maya_5
    assert [m["id"] for m in resolved["closed"]] == [maya_3]
    assert (await call(tools, "memory_conflicts", ANN)) == {"conflicts": []}
    closed = await store.get_memory(maya_3)
    assert closed is not None and not closed.current and closed.superseded_by == maya_5
    with pytest.raises(ToolError, match="no conflict"):
        await call(tools, "memory_conflicts", ANN, resolve=leo_9)


async def test_facts_with_no_relation_conflict_by_subject_as_before(store: Store) -> None:
    memory = Memory(store)
    porto = await memory.remember("ann", "Ann lives in Porto", subject="home city")
    faro = await memory.remember("ann", "Ann lives in Faro", subject="home city")
    (conflict,) = await memory.conflicts("ann")
    assert (conflict.relation, conflict.target) == (None, None)
    assert [f.id for f in conflict.facts] == [porto.id, faro.id]
    assert [f.id for f in await memory.resolve("ann", porto.id)] == [faro.id]
    assert await memory.conflicts("ann") == []
