"""The in-memory store's forged tools: its writes (``FORGED_WRITES``, dispatched by
``memory_writes``) and its reads."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ostinato.errors import NotFound
from ostinato.store.base import utcnow
from ostinato.store.forged import ForgedTool, RemoveForgedTool, SaveForgedTool, check_name

if TYPE_CHECKING:
    from ostinato.store.memory_tables import MemoryTables

Undo = list[Callable[[], None]]


def _versions(t: MemoryTables, owner: str, name: str) -> list[ForgedTool]:
    return t._forged.get((owner, name), [])


def _save(t: MemoryTables, op: SaveForgedTool, undo: Undo) -> ForgedTool:
    name = check_name(op.name)
    versions = list(_versions(t, op.owner, name))
    tool = ForgedTool(
        op.owner,
        name,
        len(versions) + 1,
        op.description,
        op.parameters,
        op.code,
        utcnow(),
        conversation_id=op.conversation_id,
    )
    previous = t._forged.get((op.owner, name))
    t._forged[op.owner, name] = [*versions, tool]
    undo.append(lambda: _put_back(t, (op.owner, name), previous))
    return tool


def _put_back(t: MemoryTables, key: tuple[str, str], previous: list[ForgedTool] | None) -> None:
    if previous is None:
        t._forged.pop(key, None)
    else:
        t._forged[key] = previous


def _remove(t: MemoryTables, op: RemoveForgedTool, undo: Undo) -> ForgedTool:
    versions = _versions(t, op.owner, op.name)
    if not versions or versions[-1].removed_at is not None:
        raise NotFound(f"no tool named {op.name!r}")
    removed = dataclasses.replace(versions[-1], removed_at=utcnow())
    t._forged[op.owner, op.name] = [*versions[:-1], removed]
    undo.append(lambda: _put_back(t, (op.owner, op.name), versions))
    return removed


FORGED_WRITES: dict[type, Callable[[Any, Any, Undo], Any]] = {
    SaveForgedTool: _save,
    RemoveForgedTool: _remove,
}


def forged_tools(t: MemoryTables, owner: str) -> list[ForgedTool]:
    return sorted(
        (
            versions[-1]
            for (o, _), versions in t._forged.items()
            if o == owner and versions[-1].removed_at is None
        ),
        key=lambda tool: tool.name,
    )


def forged_tool_versions(t: MemoryTables, owner: str, name: str) -> list[ForgedTool]:
    return list(_versions(t, owner, name))
