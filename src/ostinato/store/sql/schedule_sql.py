"""``ScheduleStore`` for both SQL engines: the ``schedules`` table (``store.schedules``).

Each method is one small transaction of its own on the lease path (``SQLLeases``'s
``_lease_write``): SQLite takes the write lock first (``BEGIN IMMEDIATE``), so one
writer at a time claims; PostgreSQL selects what is ready ``FOR UPDATE SKIP LOCKED``,
so servers racing for due work each take different rows without waiting for each
other, and counts an owner's schedules under a transaction-scoped advisory lock on the
owner, so two adds cannot both slip under the limit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import cache
from typing import Any, TypeVar

import sqlalchemy as sa

from ostinato.store.schedules import REVISED, Schedule, refuse_over
from ostinato.store.sql.leases import LeaseTx
from ostinato.store.sql.rows import Row, TimeDecoder
from ostinato.store.sql.tables import schedules as table

T = TypeVar("T")
_MOVED: tuple[str, ...] = ("state", "holder", "lease_until", "next_fire", "fired")
_MOVED += ("last_fired_at", "late_seconds", "wake_at", "run_id", "result", "attempts")


def _param(name: str, column: str | None = None) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=table.c[column or name].type)


@cache
def statements(dialect: str) -> dict[str, sa.Executable]:
    live = sa.and_(table.c.owner == _param("owner"), table.c.state != "delivered")
    ready = (
        sa.select(table.c.id)
        .where(table.c.wake_at <= _param("now", "wake_at"))
        .order_by(table.c.wake_at)
        .limit(sa.bindparam("limit", type_=sa.Integer()))
    )
    if dialect == "postgresql":
        ready = ready.with_for_update(skip_locked=True)
    until = _param("until", "lease_until")
    by_id = table.c.id == _param("b_id", "id")
    return {
        "count": sa.select(sa.func.count()).select_from(table).where(live),
        "lock_owner": sa.select(sa.func.pg_advisory_xact_lock(sa.func.hashtext(_param("owner")))),
        "insert": sa.insert(table).values({c.name: _param(c.name) for c in table.columns}),
        "list": sa.select(table).where(live).order_by(table.c.next_fire, table.c.id),
        "get": sa.select(table).where(by_id),
        "delete": sa.delete(table).where(by_id, table.c.owner == _param("owner")),
        "ready": ready,
        "take": sa.update(table)
        .where(by_id)
        .values(
            holder=_param("holder"),
            lease_until=until,
            wake_at=until,
            state=sa.case((table.c.state == "due", "claimed"), else_=table.c.state),
        )
        .returning(*table.columns),
        "revise": sa.update(table)
        .where(by_id, table.c.owner == _param("b_owner", "owner"), table.c.holder.is_(None))
        .values({name: _param(name) for name in (*REVISED, "wake_at")}),
        "move": sa.update(table)
        .where(by_id, table.c.holder == _param("b_holder", "holder"))
        .values({name: _param(name) for name in _MOVED}),
    }


def schedule_from(row: Row, decode: TimeDecoder) -> Schedule:
    values = dict(zip(table.columns.keys(), row, strict=False))
    for name in ("created_at", "next_fire", "lease_until", "last_fired_at"):
        if values[name] is not None:
            values[name] = decode(values[name])
    values.pop("wake_at")
    return Schedule(**values)


class SQLSchedules:
    """The schedule methods of ``SQLiteStore`` and ``PostgresStore`` (which supply
    ``_lease_write``, ``_lease_one``, ``_bind_time``, ``_fetch`` and ``_decode_time``)."""

    _dialect: str
    _decode_time: TimeDecoder
    _lease_write: Callable[..., Any]
    _lease_one: Callable[..., Any]
    _bind_time: Callable[[datetime], Any]
    _fetch: Callable[..., Any]

    def _values(self, schedule: Schedule) -> dict[str, Any]:
        values: dict[str, Any] = {c.name: getattr(schedule, c.name) for c in table.columns}
        for name, value in values.items():
            if isinstance(value, datetime):
                values[name] = self._bind_time(value)
        return values

    async def add_schedule(self, schedule: Schedule, limit: int) -> Schedule:
        sql = statements(self._dialect)
        values = self._values(schedule)

        def add(tx: LeaseTx) -> None:
            if self._dialect == "postgresql":
                tx.rows(sql["lock_owner"], {"owner": schedule.owner})
            refuse_over(int(tx.rows(sql["count"], {"owner": schedule.owner})[0][0]), limit)
            tx.execute(sql["insert"], values)

        await self._lease_write(add)
        return schedule

    async def schedules(self, owner: str) -> list[Schedule]:
        if "\x00" in owner:
            return []
        stmt = statements(self._dialect)["list"]
        found: Sequence[Row] = await self._fetch(stmt, {"owner": owner})
        return [schedule_from(row, self._decode_time) for row in found]

    async def schedule(self, schedule_id: str) -> Schedule | None:
        if "\x00" in schedule_id:
            return None
        found = await self._fetch(statements(self._dialect)["get"], {"b_id": schedule_id})
        return schedule_from(found[0], self._decode_time) if found else None

    async def delete_schedule(self, owner: str, schedule_id: str) -> bool:
        if "\x00" in owner + schedule_id:
            return False
        stmt = statements(self._dialect)["delete"]
        params = {"b_id": schedule_id, "owner": owner}
        changed: int = await self._lease_one(stmt, params)
        return changed > 0

    async def revise_schedule(self, schedule: Schedule) -> bool:
        values = self._values(schedule)
        params = {name: values[name] for name in REVISED}
        params |= {"b_id": schedule.id, "b_owner": schedule.owner}
        wake = schedule.wake_at
        params["wake_at"] = None if wake is None else self._bind_time(wake)
        stmt = statements(self._dialect)["revise"]
        changed: int = await self._lease_one(stmt, params)
        return changed > 0

    async def claim_schedules(
        self, holder: str, now: datetime, lease: timedelta, limit: int
    ) -> list[Schedule]:
        sql = statements(self._dialect)
        until = self._bind_time(now + lease)

        def claim(tx: LeaseTx) -> list[Row]:
            ids = tx.rows(sql["ready"], {"now": self._bind_time(now), "limit": limit})
            taken: list[Row] = []
            for (found,) in ids:
                params = {"b_id": found, "holder": holder, "until": until}
                taken.extend(tx.rows(sql["take"], params))
            return taken

        rows: list[Row] = await self._lease_write(claim)
        return [schedule_from(row, self._decode_time) for row in rows]

    async def move_schedule(self, schedule: Schedule, holder: str) -> bool:
        values = self._values(schedule)
        params = {name: values[name] for name in _MOVED if name != "wake_at"}
        wake = schedule.wake_at
        params |= {"b_id": schedule.id, "b_holder": holder}
        params["wake_at"] = None if wake is None else self._bind_time(wake)
        stmt = statements(self._dialect)["move"]
        changed: int = await self._lease_one(stmt, params)
        return changed > 0
