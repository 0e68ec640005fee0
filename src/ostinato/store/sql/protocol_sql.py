"""``ProtocolRecords`` for both SQL engines: the ``protocol_records`` table
(``store.protocol_records``).

Each write is one statement, a transaction of its own on the lease path (``_lease_one``);
creating is an ``INSERT ... ON CONFLICT DO NOTHING`` on the key, so of two requests
making one record exactly one does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ostinato.store.protocol_records import ProtocolRecord
from ostinato.store.sql.rows import Row, TimeDecoder, dump_json
from ostinato.store.sql.tables import protocol_records as t

COLUMNS = tuple(c.name for c in t.columns)
_REPLACED = ("owner", "conversation_id", "data", "updated_at")


def _param(name: str, column: str | None = None) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=t.c[column or name].type)


def _escape(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


@cache
def statements(dialect: str) -> dict[str, sa.Executable]:
    insert = (postgresql.insert(t) if dialect == "postgresql" else sqlite.insert(t)).values(
        {name: _param(name) for name in COLUMNS}
    )
    key = (t.c.kind == _param("b_kind", "kind"), t.c.id == _param("b_id", "id"))
    return {
        "create": insert.on_conflict_do_nothing(index_elements=["kind", "id"]),
        "put": insert.on_conflict_do_update(
            index_elements=["kind", "id"],
            set_={name: insert.excluded[name] for name in _REPLACED},
        ),
        "get": sa.select(t).where(*key),
        "delete": sa.delete(t).where(*key),
    }


@cache
def _listing(dialect: str, owner: bool, conversation: bool, prefix: bool) -> sa.Select[Any]:
    stmt = sa.select(t).where(t.c.kind == _param("kind"))
    if owner:
        stmt = stmt.where(t.c.owner == _param("owner"))
    if conversation:
        stmt = stmt.where(t.c.conversation_id == _param("conversation_id"))
    if prefix:
        stmt = stmt.where(t.c.id.like(_param("prefix", "id"), escape="\\"))
    order = (t.c.created_at.desc(), t.c.id.desc())
    return stmt.order_by(*order).limit(sa.bindparam("limit", type_=sa.Integer()))


class SQLProtocolRecords:
    """The record methods of ``SQLiteStore`` and ``PostgresStore`` (which supply
    ``_lease_one``, ``_bind_time``, ``_fetch`` and ``_decode_time``)."""

    _dialect: str
    _decode_time: TimeDecoder
    _lease_one: Callable[..., Any]
    _bind_time: Callable[[datetime], Any]
    _fetch: Callable[..., Any]

    def _record(self, row: Row) -> ProtocolRecord:
        values = dict(zip(COLUMNS, row, strict=True))
        return ProtocolRecord(
            kind=values["kind"],
            id=values["id"],
            owner=values["owner"],
            data=json.loads(values["data"]),
            created_at=self._decode_time(values["created_at"]),
            updated_at=self._decode_time(values["updated_at"]),
            conversation_id=values["conversation_id"],
        )

    async def put_record(self, record: ProtocolRecord, *, create: bool = False) -> bool:
        stmt = statements(self._dialect)["create" if create else "put"]
        params = {name: getattr(record, name) for name in COLUMNS}
        params["data"] = dump_json(record.data)
        params["created_at"] = self._bind_time(record.created_at)
        params["updated_at"] = self._bind_time(record.updated_at)
        changed: int = await self._lease_one(stmt, params)
        return changed > 0

    async def get_record(self, kind: str, record_id: str) -> ProtocolRecord | None:
        if "\x00" in kind + record_id:
            return None
        params = {"b_kind": kind, "b_id": record_id}
        found: Sequence[Row] = await self._fetch(statements(self._dialect)["get"], params)
        return self._record(found[0]) if found else None

    async def list_records(
        self,
        kind: str,
        *,
        owner: str | None = None,
        conversation_id: str | None = None,
        prefix: str | None = None,
        limit: int = 100,
    ) -> list[ProtocolRecord]:
        given = (kind, owner or "", conversation_id or "", prefix or "")
        if any("\x00" in value for value in given):
            return []
        stmt = _listing(self._dialect, owner is not None, conversation_id is not None, bool(prefix))
        params: dict[str, Any] = {"kind": kind, "limit": limit}
        if owner is not None:
            params["owner"] = owner
        if conversation_id is not None:
            params["conversation_id"] = conversation_id
        if prefix:
            params["prefix"] = _escape(prefix) + "%"
        found: Sequence[Row] = await self._fetch(stmt, params)
        return [self._record(row) for row in found]

    async def delete_record(self, kind: str, record_id: str) -> bool:
        if "\x00" in kind + record_id:
            return False
        stmt = statements(self._dialect)["delete"]
        params = {"b_kind": kind, "b_id": record_id}
        changed: int = await self._lease_one(stmt, params)
        return changed > 0
