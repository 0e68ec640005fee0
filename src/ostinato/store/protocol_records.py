"""The store's side of the protocols other clients speak (``server/responses``,
``server/agent_protocol``): what those protocols name that a conversation, a turn or a
row does not hold by itself, one record each.

A record is ``(kind, id)`` (a response, a run, a thread's settings, a store item), its
owner, the conversation it belongs to when it belongs to one, and its data as JSON. The
protocols' state is still the conversations, turns, rows and approvals: a record holds
only what maps one onto the other (which turn a response followed, what its request
asked) and what has no home elsewhere (an Agent Protocol store item), so any server
reading the same database answers the same.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from ostinato.errors import NotFound
from ostinato.messages import JSON

KIND_LIMIT = 40
ID_LIMIT = 400  # an Agent Protocol store item's id is its namespace and key


@dataclass(frozen=True, slots=True)
class ProtocolRecord:
    kind: str
    id: str
    owner: str
    data: JSON
    created_at: datetime
    updated_at: datetime
    conversation_id: str | None = None

    def replace(self, **changes: Any) -> ProtocolRecord:
        return dataclasses.replace(self, **changes)


@runtime_checkable
class ProtocolRecords(Protocol):
    async def put_record(self, record: ProtocolRecord, *, create: bool = False) -> bool:
        """Store ``record``: with ``create``, only if no record has its kind and id
        (``False`` then, nothing written); otherwise insert it or replace the one there
        (its owner, conversation, data and ``updated_at``; ``created_at`` stays)."""
        ...

    async def get_record(self, kind: str, record_id: str) -> ProtocolRecord | None: ...

    async def list_records(
        self,
        kind: str,
        *,
        owner: str | None = None,
        conversation_id: str | None = None,
        prefix: str | None = None,
        limit: int = 100,
    ) -> list[ProtocolRecord]:
        """Records of ``kind`` (of ``owner``, of ``conversation_id``, whose id starts
        with ``prefix``: each when given), newest first, at most ``limit``."""
        ...

    async def delete_record(self, kind: str, record_id: str) -> bool:
        """Delete one; ``False`` when there is none."""
        ...


class MemoryProtocolRecords:
    """``ProtocolRecords`` for ``MemoryStore`` (one process)."""

    _protocol_records: dict[tuple[str, str], ProtocolRecord]

    async def put_record(self, record: ProtocolRecord, *, create: bool = False) -> bool:
        key = (record.kind, record.id)
        found = self._protocol_records.get(key)
        if found is not None and create:
            return False
        if found is not None:
            record = record.replace(created_at=found.created_at)
        self._protocol_records[key] = record
        return True

    async def get_record(self, kind: str, record_id: str) -> ProtocolRecord | None:
        return self._protocol_records.get((kind, record_id))

    async def list_records(
        self,
        kind: str,
        *,
        owner: str | None = None,
        conversation_id: str | None = None,
        prefix: str | None = None,
        limit: int = 100,
    ) -> list[ProtocolRecord]:
        found = [
            r
            for (k, _), r in self._protocol_records.items()
            if k == kind
            and (owner is None or r.owner == owner)
            and (conversation_id is None or r.conversation_id == conversation_id)
            and (prefix is None or r.id.startswith(prefix))
        ]
        found.sort(key=lambda r: (r.created_at, r.id), reverse=True)
        return found[:limit]

    async def delete_record(self, kind: str, record_id: str) -> bool:
        return self._protocol_records.pop((kind, record_id), None) is not None


def records(store: object) -> ProtocolRecords:
    """``store`` as the keeper of protocol records (every store of ostinato's is one;
    another is answered with a 404: it keeps no runs, responses or store items)."""
    if not isinstance(store, ProtocolRecords):
        raise NotFound("this store keeps no protocol records (runs, responses, store items)")
    return store
