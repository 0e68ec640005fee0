"""Per-person MCP servers in SQL, for both engines: their write statements, how their
ops run (through ``ops.Executor``), and their read."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal, TypeAlias, assert_never

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ostinato.errors import Conflict, NotFound
from ostinato.store.mcp_servers import (
    McpServerOp,
    McpServerRecord,
    RemoveMcpServer,
    SaveMcpServer,
    check_server_name,
)
from ostinato.store.sql.rows import Row, TimeDecoder
from ostinato.store.sql.tables import mcp_servers as table

McpWriteName: TypeAlias = Literal["insert_mcp_server", "delete_mcp_server"]
_COLUMNS = ("owner", "name", "url", "secret", "risk", "created_at")


def mcp_statements(dialect: str) -> dict[Any, sa.Executable]:
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    values = {c: sa.bindparam(c, type_=table.c[c].type) for c in _COLUMNS}
    return {
        "insert_mcp_server": insert(table)
        .values(values)
        .on_conflict_do_nothing(index_elements=["owner", "name"]),
        "delete_mcp_server": sa.delete(table).where(
            table.c.owner == sa.bindparam("b_owner", type_=table.c.owner.type),
            table.c.name == sa.bindparam("b_name", type_=table.c.name.type),
        ),
    }


def apply_mcp_op(ex: Any, op: McpServerOp, now: datetime) -> Any:
    """Run one ``store.mcp_servers`` op on ``ex`` (an ``ops.Executor``)."""
    match op:
        case SaveMcpServer(record=record):
            params = {c: getattr(record, c) for c in _COLUMNS}
            params["name"] = check_server_name(record.name)
            params["created_at"] = ex.time(record.created_at)
            if not ex.execute("insert_mcp_server", params):
                raise Conflict(f"you already have an MCP server named {record.name!r}")
            return record
        case RemoveMcpServer(owner=owner, name=name):
            if not ex.execute("delete_mcp_server", {"b_owner": owner, "b_name": name}):
                raise NotFound(f"no MCP server named {name!r}")
            return None
        case _:
            assert_never(op)


_OWNED = (
    sa.select(*(table.c[c] for c in _COLUMNS))
    .where(table.c.owner == sa.bindparam("owner", type_=table.c.owner.type))
    .order_by(table.c.name)
)  # built once: the SQLite store compiles a statement once per object


class McpServerReads:
    """The per-person MCP server read of ``SQLReads``."""

    _decode_time: TimeDecoder

    async def _fetch(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]:
        raise NotImplementedError

    async def mcp_servers(self, owner: str) -> list[McpServerRecord]:
        if "\x00" in owner:
            return []
        found = await self._fetch(_OWNED, {"owner": owner})
        return [McpServerRecord(o, n, u, s, r, self._decode_time(c)) for o, n, u, s, r, c in found]
