"""Forged tools in SQL, for both engines: their write statements, how their ops run
(through ``ops.Executor``), and their reads.

A new version's number is taken inside its insert (``INSERT ... SELECT MAX(version) + 1``,
doing nothing on a clash), so two saves of one name racing each get their own number:
the loser inserts nothing and tries again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal, TypeAlias, assert_never

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ostinato.errors import NotFound, StoreError
from ostinato.store.forged import (
    ForgedOp,
    ForgedTool,
    RemoveForgedTool,
    SaveForgedTool,
    check_name,
)
from ostinato.store.sql.rows import Row, TimeDecoder
from ostinato.store.sql.tables import forged_tools as table

ForgedWriteName: TypeAlias = Literal["insert_forged_tool", "remove_forged_tool"]

SAVE_ATTEMPTS = 8
_OWNER = sa.bindparam("owner", type_=table.c.owner.type)
_NAME = sa.bindparam("name", type_=table.c.name.type)
# An UPDATE may not bind a column's own name: its WHERE takes these.
_B_OWNER = sa.bindparam("b_owner", type_=table.c.owner.type)
_B_NAME = sa.bindparam("b_name", type_=table.c.name.type)


def _newest(owner: Any = table.c.owner, name: Any = table.c.name) -> sa.ScalarSelect[Any]:
    other = table.alias("newer")
    return (
        sa.select(sa.func.max(other.c.version))
        .where(other.c.owner == owner, other.c.name == name)
        .scalar_subquery()
    )


def forged_statements(dialect: str) -> dict[Any, sa.Executable]:
    """The write statements of ``store.forged`` ops for ``dialect``, by ``ForgedWriteName``."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    values = {
        "owner": _OWNER,
        "name": _NAME,
        "version": sa.func.coalesce(sa.func.max(table.c.version), sa.literal_column("0"))
        + sa.literal_column("1"),
        **{
            c: sa.bindparam(c, type_=table.c[c].type)
            for c in ("description", "parameters", "code", "created_at", "conversation_id")
        },
    }
    select = sa.select(*values.values()).where(table.c.owner == _OWNER, table.c.name == _NAME)
    return {
        "insert_forged_tool": insert(table)
        .from_select(list(values), select)
        .on_conflict_do_nothing(index_elements=["owner", "name", "version"])
        .returning(table.c.version),
        "remove_forged_tool": sa.update(table)
        .where(
            table.c.owner == _B_OWNER,
            table.c.name == _B_NAME,
            table.c.removed_at.is_(None),
            table.c.version == _newest(_B_OWNER, _B_NAME),
        )
        .values(removed_at=sa.bindparam("removed_at", type_=table.c.removed_at.type))
        .returning(*table.columns),
    }


def apply_forged_op(ex: Any, op: ForgedOp, now: datetime) -> ForgedTool:
    """Run one ``store.forged`` op on ``ex`` (an ``ops.Executor``) at time ``now``."""
    match op:
        case SaveForgedTool():
            return _save(ex, op, now)
        case RemoveForgedTool(owner=owner, name=name):
            params = {"b_owner": owner, "b_name": name, "removed_at": ex.time(now)}
            found = ex.row("remove_forged_tool", params)
            if found is None:
                raise NotFound(f"no tool named {name!r}")
            return forged_tool(found, ex.read_time)
        case _:
            assert_never(op)


def _save(ex: Any, op: SaveForgedTool, now: datetime) -> ForgedTool:
    name = check_name(op.name)
    params = {
        "owner": op.owner,
        "name": name,
        "description": op.description,
        "parameters": json.dumps(op.parameters, ensure_ascii=False, separators=(",", ":")),
        "code": op.code,
        "created_at": ex.time(now),
        "conversation_id": op.conversation_id,
    }
    for _ in range(SAVE_ATTEMPTS):
        version = ex.returning("insert_forged_tool", params)
        if version is not None:
            return ForgedTool(
                op.owner,
                name,
                int(version),
                op.description,
                op.parameters,
                op.code,
                now,
                conversation_id=op.conversation_id,
            )
    raise StoreError(f"could not number a new version of {name!r}")


def forged_tool(row: Row, decode: TimeDecoder) -> ForgedTool:
    owner, name, version, description, parameters, code, created, removed, cid = row[:9]
    return ForgedTool(
        owner,
        name,
        int(version),
        description,
        json.loads(parameters),
        code,
        decode(created),
        decode(removed) if removed is not None else None,
        cid,
    )


_CURRENT = (
    sa.select(table)
    .where(table.c.owner == _OWNER, table.c.removed_at.is_(None), table.c.version == _newest())
    .order_by(table.c.name)
)
_VERSIONS = (
    sa.select(table).where(table.c.owner == _OWNER, table.c.name == _NAME).order_by(table.c.version)
)


class ForgedReads:
    """The forged-tool reads of ``SQLReads`` (an engine supplies ``_fetch`` and
    ``_decode_time``)."""

    _decode_time: TimeDecoder

    async def _fetch(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]:
        raise NotImplementedError

    async def forged_tools(self, owner: str) -> list[ForgedTool]:
        if "\x00" in owner:
            return []
        found = await self._fetch(_CURRENT, {"owner": owner})
        return [forged_tool(r, self._decode_time) for r in found]

    async def forged_tool_versions(self, owner: str, name: str) -> list[ForgedTool]:
        if "\x00" in owner + name:
            return []
        found = await self._fetch(_VERSIONS, {"owner": owner, "name": name})
        return [forged_tool(r, self._decode_time) for r in found]
