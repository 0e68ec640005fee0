"""``RequestKeys`` for both SQL engines: the ``request_keys`` table.

Each method is one small transaction of its own on the lease path (``SQLLeases``'s
``_lease_write``). Claiming is an ``INSERT ... ON CONFLICT DO NOTHING`` on the primary
key (owner, key): of two requests with one key, in one process or in several, exactly
one inserts, and the other reads the winner's record. The clock is the local one (a
record's window is hours; servers' clocks agree to far better than that).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import cache
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ostinato.store.base import utcnow
from ostinato.store.idempotency import SETTLED_FIELDS, RequestKey
from ostinato.store.sql.leases import LeaseTx
from ostinato.store.sql.rows import Row, TimeDecoder
from ostinato.store.sql.tables import request_keys as t

T = TypeVar("T")
COLUMNS = tuple(c.name for c in t.columns)


def _param(name: str, column: str | None = None) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=t.c[column or name].type)


@cache
def statements(dialect: str) -> dict[str, sa.Executable]:
    mine = (t.c.owner == _param("b_owner", "owner"), t.c.key == _param("b_key", "key"))
    insert = (postgresql.insert(t) if dialect == "postgresql" else sqlite.insert(t)).values(
        {name: _param(name) for name in COLUMNS}
    )
    settle = {
        f"settle_{name}": sa.update(t).where(*mine).values({name: _param(name)})
        for name in SETTLED_FIELDS
    }
    return {
        "expire": sa.delete(t).where(t.c.expires_at <= _param("now", "expires_at")),
        "claim": insert.on_conflict_do_nothing(index_elements=["owner", "key"]),
        "get": sa.select(t).where(*mine, t.c.expires_at > _param("now", "expires_at")),
        "release": sa.delete(t).where(*mine),
        **settle,
    }


class SQLRequestKeys(ABC):
    """The idempotency key methods of ``SQLiteStore`` and ``PostgresStore``."""

    _dialect: str
    _decode_time: TimeDecoder

    @abstractmethod
    async def _lease_write(self, work: Callable[[LeaseTx], T]) -> T: ...

    @abstractmethod
    async def _lease_one(self, stmt: sa.Executable, params: dict[str, Any]) -> int: ...

    @abstractmethod
    def _bind_time(self, value: datetime) -> Any: ...

    @abstractmethod
    async def _fetch(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]: ...

    async def claim_request(self, record: RequestKey) -> RequestKey | None:
        found = statements(self._dialect)
        params = {name: getattr(record, name) for name in COLUMNS}
        for name in ("created_at", "expires_at"):
            params[name] = self._bind_time(params[name])
        now = {"now": self._bind_time(utcnow())}

        def claim(tx: LeaseTx) -> int:
            tx.execute(found["expire"], now)
            return tx.execute(found["claim"], params)

        for _ in range(3):  # a record that expires between the two steps: claim again
            if await self._lease_write(claim) > 0:
                return None
            existing = await self.get_request(record.owner, record.key)
            if existing is not None:
                return existing
        raise RuntimeError(f"could not claim or read the key {record.key!r}")

    async def settle_request(self, owner: str, key: str, **fields: Any) -> None:
        found = statements(self._dialect)
        unknown = set(fields) - set(SETTLED_FIELDS)
        if unknown:
            raise ValueError(f"not a settled field: {sorted(unknown)}")
        mine = {"b_owner": owner, "b_key": key}

        def settle(tx: LeaseTx) -> None:
            for name, value in fields.items():
                tx.execute(found[f"settle_{name}"], {**mine, name: value})

        await self._lease_write(settle)

    async def get_request(self, owner: str, key: str) -> RequestKey | None:
        params = {"b_owner": owner, "b_key": key, "now": self._bind_time(utcnow())}
        rows = await self._fetch(statements(self._dialect)["get"], params)
        if not rows:
            return None
        values = dict(zip(COLUMNS, rows[0], strict=True))
        for name in ("created_at", "expires_at"):
            values[name] = self._decode_time(values[name])
        return RequestKey(**values)

    async def release_request(self, owner: str, key: str) -> None:
        stmt = statements(self._dialect)["release"]
        await self._lease_one(stmt, {"b_owner": owner, "b_key": key})
