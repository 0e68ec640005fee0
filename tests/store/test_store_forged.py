"""Forged tools in the store, on every engine: versions, removal, owners kept apart."""

from __future__ import annotations

import pytest

from ostinato.errors import InvalidRequest, NotFound
from ostinato.store import Store
from ostinato.store.base import ForgetFact
from ostinato.store.forged import ForgedTool, RemoveForgedTool, SaveForgedTool

SCHEMA = {"type": "object", "properties": {"c": {"type": "number"}}, "required": ["c"]}


async def save(store: Store, owner: str, name: str, code: str) -> ForgedTool:
    (tool,) = await store.write(SaveForgedTool(owner, name, f"{name} tool", SCHEMA, code))
    assert isinstance(tool, ForgedTool)
    return tool


async def test_each_save_is_a_new_version_and_the_newest_is_listed(store: Store) -> None:
    one = await save(store, "ann", "c_to_f", "(a) => a.c * 9 / 5 + 32")
    assert (one.owner, one.name, one.version, one.tool_name) == ("ann", "c_to_f", 1, "my_c_to_f")
    assert one.parameters == SCHEMA and one.removed_at is None
    two = await save(store, "ann", "c_to_f", "(a) => (a.c * 9) / 5 + 32")
    other = await save(store, "ann", "another", "() => 1")
    assert two.version == 2
    listed = await store.forged_tools("ann")
    assert [(t.name, t.version, t.code) for t in listed] == [
        ("another", 1, "() => 1"),
        ("c_to_f", 2, two.code),
    ]
    versions = await store.forged_tool_versions("ann", "c_to_f")
    assert [(v.version, v.code) for v in versions] == [(1, one.code), (2, two.code)]
    assert versions[0].created_at == one.created_at and versions[0].parameters == SCHEMA
    assert other.version == 1


async def test_owners_do_not_see_each_others_tools(store: Store) -> None:
    await save(store, "ann", "secret", "() => 'ann'")
    assert await store.forged_tools("bob") == []
    assert await store.forged_tool_versions("bob", "secret") == []
    with pytest.raises(NotFound):
        await store.write(RemoveForgedTool("bob", "secret"))
    assert [t.name for t in await store.forged_tools("ann")] == ["secret"]


async def test_removing_keeps_the_versions_and_a_new_save_comes_after(store: Store) -> None:
    await save(store, "ann", "t", "() => 1")
    (removed,) = await store.write(RemoveForgedTool("ann", "t"))
    assert isinstance(removed, ForgedTool) and removed.removed_at is not None
    assert removed.version == 1
    assert await store.forged_tools("ann") == []
    with pytest.raises(NotFound):
        await store.write(RemoveForgedTool("ann", "t"))
    back = await save(store, "ann", "t", "() => 2")
    assert back.version == 2
    assert [t.version for t in await store.forged_tools("ann")] == [2]
    history = await store.forged_tool_versions("ann", "t")
    assert [(v.version, v.removed_at is not None) for v in history] == [(1, True), (2, False)]


async def test_bad_names_are_refused_and_a_failed_write_saves_nothing(store: Store) -> None:
    for name in ("", "Upper", "9lives", "a-b", "x" * 42, "ü"):
        with pytest.raises(InvalidRequest):
            await save(store, "ann", name, "() => 1")
    with pytest.raises(NotFound):
        await store.write(
            SaveForgedTool("ann", "t", "d", SCHEMA, "() => 1"), ForgetFact("ann", "nope")
        )
    assert await store.forged_tools("ann") == []
    assert (await save(store, "ann", "my_prefixed", "() => 1")).name == "prefixed"
