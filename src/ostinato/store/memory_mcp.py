"""The in-memory store's per-person MCP servers: its writes (``MCP_SERVER_WRITES``,
dispatched by ``memory_writes``) and its read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ostinato.errors import Conflict, NotFound
from ostinato.store.mcp_servers import (
    McpServerRecord,
    RemoveMcpServer,
    SaveMcpServer,
    check_server_name,
)

Undo = list[Callable[[], None]]


def _save(t: Any, op: SaveMcpServer, undo: Undo) -> McpServerRecord:
    record = op.record
    key = (record.owner, check_server_name(record.name))
    if key in t._mcp_servers:
        raise Conflict(f"you already have an MCP server named {record.name!r}")
    t._mcp_servers[key] = record
    undo.append(lambda: t._mcp_servers.pop(key, None))
    return record


def _remove(t: Any, op: RemoveMcpServer, undo: Undo) -> McpServerRecord:
    key = (op.owner, op.name)
    record = t._mcp_servers.pop(key, None)
    if record is None:
        raise NotFound(f"no MCP server named {op.name!r}")
    undo.append(lambda: t._mcp_servers.__setitem__(key, record))
    return record  # type: ignore[no-any-return]


MCP_SERVER_WRITES: dict[type, Callable[[Any, Any, Undo], Any]] = {
    SaveMcpServer: _save,
    RemoveMcpServer: _remove,
}


def mcp_servers(t: Any, owner: str) -> list[McpServerRecord]:
    return sorted((r for (o, _), r in t._mcp_servers.items() if o == owner), key=lambda r: r.name)
