"""``VersionStore`` for both SQL engines (``store.versions``) over its two tables
(``version_tables``): every version of every agent, and the version each conversation is
pinned to (``version`` null: the latest). Each method is one transaction of its own, as
the leases' are."""

from __future__ import annotations

import functools
import json
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypeAlias, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ostinato.messages import JSON
from ostinato.store.sql.leases import LeaseTx
from ostinato.store.sql.rows import Row
from ostinato.store.sql.version_tables import agent_versions, conversation_agents
from ostinato.versions import AgentVersion

T = TypeVar("T")

_V, _C = agent_versions, conversation_agents
_NEWEST = (
    sa.select(_V.c.number, _V.c.hash, _V.c.content)
    .where(_V.c.agent == sa.bindparam("agent", type_=sa.String()))
    .order_by(_V.c.number.desc())
    .limit(1)
)
_ALL = sa.select(_V.c.number, _V.c.hash, _V.c.content).where(
    _V.c.agent == sa.bindparam("agent", type_=sa.String())
)
_ONE = _ALL.where(_V.c.number == sa.bindparam("number", type_=sa.Integer()))
_PINS = sa.select(_C.c.agent, _C.c.version).where(
    _C.c.conversation_id == sa.bindparam("conversation_id", type_=sa.String())
)


def _insert(dialect: str) -> Any:
    return postgresql.insert if dialect == "postgresql" else sqlite.insert


@functools.cache
def _add_version(dialect: str) -> Any:
    return _insert(dialect)(_V).on_conflict_do_nothing()


@functools.cache
def _pin(dialect: str, move: bool) -> Any:
    """Built once each: a statement object is compiled once (``sqlite_sql.CompiledCache``
    keys on the object), where one built a call was compiled every call."""
    insert = _insert(dialect)(_C)
    if not move:
        return insert.on_conflict_do_nothing()
    return insert.on_conflict_do_update(
        index_elements=["conversation_id", "agent"], set_={"version": insert.excluded.version}
    )


def _version(agent: str, row: Row) -> AgentVersion:
    return AgentVersion(agent, int(row[0]), str(row[1]), json.loads(row[2]))


VersionWriteName: TypeAlias = Literal["pin_version"]


def version_statements(dialect: str) -> dict[Any, sa.Executable]:
    """A new conversation's pins, written with it (``CreateConversation.pins``): one
    row each, with its values named so a planned write can send it (``pg_writer``)."""
    values = {
        "conversation_id": sa.bindparam("conversation_id", type_=sa.String()),
        "agent": sa.bindparam("agent", type_=sa.String()),
        "version": sa.bindparam("version", type_=sa.Integer()),
    }
    return {"pin_version": _insert(dialect)(_C).values(values).on_conflict_do_nothing()}


class SQLVersions:
    """The version methods of ``SQLiteStore`` and ``PostgresStore``."""

    _dialect: str

    @abstractmethod
    async def _lease_write(self, work: Callable[[LeaseTx], T]) -> T: ...

    @abstractmethod
    async def _lease_many(self, stmt: sa.Executable, params: Sequence[dict[str, Any]]) -> None: ...

    @abstractmethod
    def _bind_time(self, value: datetime) -> Any: ...

    @abstractmethod
    async def _fetch(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]: ...

    async def record_agent_version(
        self, agent: str, hash: str, content: JSON, now: datetime
    ) -> AgentVersion:
        insert = _add_version(self._dialect)
        text = json.dumps(content, sort_keys=True, ensure_ascii=False)

        def work(tx: LeaseTx) -> AgentVersion | None:
            found = tx.rows(_NEWEST, {"agent": agent})
            if found and found[0][1] == hash:
                return _version(agent, found[0])
            number = int(found[0][0]) + 1 if found else 1
            params = {"agent": agent, "number": number, "hash": hash, "content": text}
            if not tx.execute(insert, params | {"created_at": self._bind_time(now)}):
                return None  # another server took that number: read again
            return AgentVersion(agent, number, hash, content)

        for _ in range(8):
            made = await self._lease_write(work)
            if made is not None:
                return made
        raise RuntimeError(f"could not record a version of {agent!r}")

    async def agent_versions(self, agent: str) -> list[AgentVersion]:
        if "\x00" in agent:
            return []
        found = await self._fetch(_ALL.order_by(_V.c.number), {"agent": agent})
        return [_version(agent, row) for row in found]

    async def agent_version(self, agent: str, number: int) -> AgentVersion | None:
        if "\x00" in agent or not 0 < number < 2**31:
            return None
        found = await self._fetch(_ONE, {"agent": agent, "number": number})
        return _version(agent, found[0]) if found else None

    async def conversation_versions(self, conversation_id: str) -> dict[str, int | None]:
        if "\x00" in conversation_id:
            return {}
        found = await self._fetch(_PINS, {"conversation_id": conversation_id})
        return {str(agent): version for agent, version in found}

    async def pin_versions(
        self, conversation_id: str, pins: Mapping[str, int | None], *, move: bool = False
    ) -> None:
        every = [
            {"conversation_id": conversation_id, "agent": agent, "version": number}
            for agent, number in pins.items()
        ]
        await self._lease_many(_pin(self._dialect, move), every)
