"""The read half of the ``Store`` protocol, written once for both SQL engines.

``SQLReads`` holds every read method; an engine supplies ``_fetch`` (run a select,
return its rows), ``_decode_time`` (its timestamp representation) and ``_dialect`` (for
the one read written per engine: full-text search of memories).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from ostinato.approvals import Approval, Grant
from ostinato.store.base import (
    Conversation,
    HistoryWindow,
    MemoryConflict,
    MemoryFact,
    MemoryHit,
    QueuedInput,
    ToolCallRecord,
    Turn,
)
from ostinato.store.relations import MemoryRelation
from ostinato.store.search import fts5_query, search_terms, websearch_query
from ostinato.store.sql import fact_reads, relation_sql, rows, statements
from ostinato.store.sql.account_sql import AccountReads
from ostinato.store.sql.forged_sql import ForgedReads
from ostinato.store.sql.job_sql import JobReads
from ostinato.store.sql.mcp_sql import McpServerReads
from ostinato.store.sql.rows import Row, TimeDecoder
from ostinato.store.sql.search_sql import SQLSearch
from ostinato.store.sql.tree_sql import SQLTreeReads


class SQLReads(AccountReads, ForgedReads, McpServerReads, JobReads, SQLSearch, SQLTreeReads, ABC):
    """Reads shared by ``SQLiteStore`` and ``PostgresStore``."""

    _decode_time: TimeDecoder
    _message_cache: rows.MessageCache
    _dialect: str  # "sqlite" or "postgresql"

    @abstractmethod
    async def _fetch(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]:
        """Run ``stmt`` with ``params``; every row it selects."""

    async def get_conversation(self, conversation_id: str) -> Conversation | None:
        found = await self._fetch(statements.get_conversation(), {"id": conversation_id})
        return rows.conversation(found[0], self._decode_time) if found else None

    async def conversation_and_window(
        self, conversation_id: str, *, limit: int
    ) -> tuple[Conversation | None, HistoryWindow]:
        """One statement with ``_window_in_one`` (``tree_sql.window_in_one``), else
        ``get_conversation`` and ``window``."""
        if self._window_in_one:
            row, window = await self._in_one(conversation_id, limit, conversation=True)
            found = rows.conversation(row, self._decode_time) if row is not None else None
            return found, window
        conversation = await self.get_conversation(conversation_id)
        if conversation is None:
            return None, HistoryWindow(None, [], False)
        return conversation, await self.window(conversation_id, limit=limit)

    async def list_conversations(
        self,
        *,
        owner: str | None = None,
        limit: int = 50,
        before: str | None = None,
        archived: bool | None = None,
    ) -> list[Conversation]:
        """Newest first; ``before`` is the id of the last conversation of the previous page."""
        stmt = statements.list_conversations(owner is not None, before is not None, archived)
        found = await self._fetch(stmt, {"owner": owner, "before": before, "limit": limit})
        return [rows.conversation(r, self._decode_time) for r in found]

    async def get_turn(self, turn_id: str) -> Turn | None:
        found = await self._fetch(statements.get_turn(), {"id": turn_id})
        return rows.turn(found[0], self._decode_time) if found else None

    async def list_turns(self, conversation_id: str) -> list[Turn]:
        found = await self._fetch(statements.list_turns(), {"conversation_id": conversation_id})
        return [rows.turn(r, self._decode_time) for r in found]

    async def running_turns(self) -> list[Turn]:
        found = await self._fetch(statements.running_turns(), {"status": "running"})
        return [rows.turn(r, self._decode_time) for r in found]

    async def list_tool_calls(
        self, conversation_id: str, *, turn_id: str | None = None
    ) -> list[ToolCallRecord]:
        stmt = statements.list_tool_calls(turn_id is not None)
        found = await self._fetch(stmt, {"conversation_id": conversation_id, "turn_id": turn_id})
        return [rows.tool_call(r, self._decode_time) for r in found]

    async def get_approval(self, approval_id: str) -> Approval | None:
        found = await self._fetch(statements.get_approval(), {"id": approval_id})
        return rows.approval(found[0], self._decode_time) if found else None

    async def list_approvals(
        self, conversation_id: str | None = None, *, pending_only: bool = False
    ) -> list[Approval]:
        """Oldest first; all conversations when ``conversation_id`` is None."""
        stmt = statements.list_approvals(conversation_id is not None, pending_only)
        params = {"conversation_id": conversation_id, "status": "pending"}
        found = await self._fetch(stmt, params)
        return [rows.approval(r, self._decode_time) for r in found]

    async def get_grant(self, grant_id: str) -> Grant | None:
        found = await self._fetch(statements.get_grant(), {"id": grant_id})
        return rows.grant(found[0], self._decode_time) if found else None

    async def list_grants(
        self,
        *,
        owner: str | None = None,
        conversation_id: str | None = None,
        include_revoked: bool = False,
    ) -> list[Grant]:
        """Grants of ``owner`` plus grants of ``conversation_id`` (either may be None),
        oldest first."""
        if owner is None and conversation_id is None:
            return []
        stmt = statements.list_grants(
            owner is not None, conversation_id is not None, include_revoked
        )
        found = await self._fetch(stmt, {"owner": owner, "conversation_id": conversation_id})
        return [rows.grant(r, self._decode_time) for r in found]

    async def list_queued(self, conversation_id: str | None = None) -> list[QueuedInput]:
        """Inputs still queued, in arrival (``position``) order."""
        stmt = statements.list_queued(conversation_id is not None)
        found = await self._fetch(stmt, {"conversation_id": conversation_id, "status": "queued"})
        # (read at every step of a running turn: ``loop.steering``; most find none)
        return [rows.queued_input(r, self._decode_time) for r in found] if found else []

    async def switched_off_tools(self, scope: str) -> frozenset[str]:
        found = await self._fetch(statements.switched_off_tools(), {"scope": scope})
        return frozenset(str(row[0]) for row in found)

    # --- long-term memory -----------------------------------------------------------

    async def get_memory(self, memory_id: str) -> MemoryFact | None:
        found = await self._fetch(fact_reads.get_memory(), {"id": memory_id})
        return rows.memory(found[0], self._decode_time) if found else None

    async def list_memories(
        self,
        scope: str,
        *,
        include_closed: bool = False,
        limit: int = 100,
        before: MemoryFact | None = None,
    ) -> list[MemoryFact]:
        """Facts of ``scope``, newest recorded first; current ones unless
        ``include_closed``; after ``before`` in that order, when given."""
        stmt = fact_reads.list_memories(include_closed, before is not None)
        params: dict[str, Any] = {"scope": scope, "limit": limit}
        if before is not None:
            params["before"] = before.id
        found = await self._fetch(stmt, params)
        return [rows.memory(r, self._decode_time) for r in found]

    async def search_memories(self, scope: str, query: str, *, limit: int = 10) -> list[MemoryHit]:
        """Current facts of ``scope`` matching words of ``query``, best first."""
        terms = search_terms(query)
        if not terms or limit <= 0:
            return []
        postgres = self._dialect == "postgresql"
        match = websearch_query(terms) if postgres else fts5_query(terms)
        if not match:
            return []
        # FTS5 loads its index's structure again for a query on a snapshot newer than its
        # last one (any write to the file): on a server that is every recall. A scope with
        # no current fact (a new owner, a conversation without one) is answered by a
        # probe of the scope's index instead (docs/memory.md).
        if not postgres and not await self._fetch(fact_reads.holds_facts(), {"scope": scope}):
            return []
        params = {"scope": scope, "match": match, "limit": limit}
        found = await self._fetch(fact_reads.search_memories(self._dialect), params)
        return [MemoryHit(rows.memory(r, self._decode_time), float(r[-1])) for r in found]

    async def memory_relations(self, scope: str, memory_id: str) -> list[MemoryRelation]:
        params = {"scope": scope, "memory_id": memory_id}
        found = await self._fetch(relation_sql.relations_of(), params)
        return [relation_sql.relation(r, self._decode_time) for r in found]

    async def memory_conflicts(self, scope: str) -> list[MemoryConflict]:
        """Subjects of ``scope`` with more than one distinct current fact, by subject."""
        found = await self._fetch(relation_sql.memory_conflicts(), {"scope": scope})
        by_subject: dict[str, list[MemoryFact]] = {}
        for row in found:
            fact = rows.memory(row, self._decode_time)
            assert fact.subject is not None
            by_subject.setdefault(fact.subject, []).append(fact)
        return [MemoryConflict(subject, facts) for subject, facts in by_subject.items()]
