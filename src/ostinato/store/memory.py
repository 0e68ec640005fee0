"""An in-memory store: the reference semantics of ``Store``, for tests and benchmarks.

The reads are here; the writes are one function per op in ``memory_writes``, which
commits all of a write's ops or none.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ostinato.approvals import Approval, Grant
from ostinato.messages import Message
from ostinato.store.accounts import ApiKey
from ostinato.store.base import (
    Conversation,
    HistoryWindow,
    MemoryConflict,
    MemoryFact,
    MemoryHit,
    QueuedInput,
    ToolCallRecord,
    Turn,
    WriteOp,
)
from ostinato.store.forged import ForgedTool
from ostinato.store.idempotency import MemoryRequestKeys
from ostinato.store.leases import MemoryLeases
from ostinato.store.mcp_servers import McpServerRecord
from ostinato.store.memory_accounts import api_key, api_keys
from ostinato.store.memory_forged import forged_tool_versions, forged_tools
from ostinato.store.memory_jobs import MemoryJobReads
from ostinato.store.memory_mcp import mcp_servers
from ostinato.store.memory_relations import relations_of
from ostinato.store.memory_search import search
from ostinato.store.memory_tables import MemoryTables
from ostinato.store.memory_tree import branch_rows, tree_of, window_of
from ostinato.store.memory_writes import apply
from ostinato.store.protocol_records import MemoryProtocolRecords
from ostinato.store.relations import MemoryRelation
from ostinato.store.schedules import MemorySchedules
from ostinato.store.search import SearchHit, overlap_score, search_terms
from ostinato.store.spend import MemorySpend
from ostinato.store.tree import Branch, Tree
from ostinato.store.versions import MemoryVersions


class MemoryStore(
    MemoryLeases,
    MemoryRequestKeys,
    MemorySchedules,
    MemoryProtocolRecords,
    MemoryJobReads,
    MemorySpend,
    MemoryVersions,
    MemoryTables,
):
    """The tables (``MemoryTables``), written by ``memory_writes`` and read here; its
    leases (``MemoryLeases``), idempotency keys (``MemoryRequestKeys``), schedules
    (``MemorySchedules``), protocol records (``MemoryProtocolRecords``), background jobs'
    reads (``MemoryJobReads``) and spend (``MemorySpend``)."""

    async def write(self, *ops: WriteOp) -> list[Any]:
        return apply(self, ops)

    async def get_api_key(self, key_id: str) -> ApiKey | None:
        return api_key(self, key_id)

    async def list_api_keys(self, owner: str | None = None) -> list[ApiKey]:
        return api_keys(self, owner)

    async def get_memory(self, memory_id: str) -> MemoryFact | None:
        return self._memories.get(memory_id)

    def _scope_facts(self, scope: str, include_closed: bool) -> list[MemoryFact]:
        return sorted(
            (
                f
                for f in self._memories.values()
                if f.scope == scope and (include_closed or f.current)
            ),
            key=lambda f: (f.recorded_at, f.id),
            reverse=True,
        )

    async def list_memories(
        self,
        scope: str,
        *,
        include_closed: bool = False,
        limit: int = 100,
        before: MemoryFact | None = None,
    ) -> list[MemoryFact]:
        facts = self._scope_facts(scope, include_closed)
        if before is not None:
            cursor = (before.recorded_at, before.id)
            facts = [f for f in facts if (f.recorded_at, f.id) < cursor]
        return facts[:limit]

    async def search_memories(self, scope: str, query: str, *, limit: int = 10) -> list[MemoryHit]:
        terms = search_terms(query)
        if not terms:
            return []
        hits = [
            MemoryHit(f, score)
            for f in self._scope_facts(scope, False)
            if (score := overlap_score(terms, f.text, f.subject)) > 0
        ]
        hits.sort(key=lambda h: h.score, reverse=True)  # stable: newer first among equals
        return hits[:limit]

    async def memory_conflicts(self, scope: str) -> list[MemoryConflict]:
        by_subject: dict[str, list[MemoryFact]] = {}
        for fact in reversed(self._scope_facts(scope, False)):
            if fact.subject is not None:
                by_subject.setdefault(fact.subject, []).append(fact)
        return [
            MemoryConflict(subject, facts)
            for subject, facts in sorted(by_subject.items())
            if len({f.text for f in facts}) > 1
        ]

    # --- reads -----------------------------------------------------------------------

    def _current(self, conversation: Conversation) -> Conversation:
        """The conversation with its ``updated_at``: the newest of the row's, its last
        state change's and its last message's."""
        newest = conversation.updated_at
        updated = self._updated.get(conversation.id)
        if updated is not None and updated > newest:
            newest = updated
        rows = self._messages.get(conversation.id)
        if rows and (last := rows[-1].created_at) is not None and last > newest:
            newest = last
        if newest == conversation.updated_at:
            return conversation
        return dataclasses.replace(conversation, updated_at=newest)

    async def get_conversation(self, conversation_id: str) -> Conversation | None:
        found = self._conversations.get(conversation_id)
        return self._current(found) if found is not None else None

    async def list_conversations(
        self,
        *,
        owner: str | None = None,
        limit: int = 50,
        before: str | None = None,
        archived: bool | None = None,
    ) -> list[Conversation]:
        rows = sorted(
            (self._current(c) for c in self._conversations.values()),
            key=lambda c: c.id,
            reverse=True,
        )
        if owner is not None:
            rows = [c for c in rows if c.owner == owner]
        if before is not None:
            rows = [c for c in rows if c.id < before]
        if archived is not None:
            rows = [c for c in rows if (c.archived_at is not None) == archived]
        return rows[:limit]

    async def search_messages(
        self, query: str, *, owner: str | None, limit: int = 20
    ) -> list[SearchHit]:
        return search(self, query, owner, limit)

    async def list_messages(
        self,
        conversation_id: str,
        *,
        after_seq: int = 0,
        limit: int | None = None,
        include_hidden: bool = True,
        branch: Branch | None = None,
    ) -> list[Message]:
        rows = [
            m
            for m in branch_rows(self, conversation_id, branch)
            if (m.seq or 0) > after_seq and (include_hidden or not m.hidden)
        ]
        return rows[:limit] if limit is not None else rows

    async def window(
        self, conversation_id: str, *, limit: int, branch: Branch | None = None
    ) -> HistoryWindow:
        return window_of(self, conversation_id, limit, branch)

    async def conversation_and_window(
        self, conversation_id: str, *, limit: int
    ) -> tuple[Conversation | None, HistoryWindow]:
        found = await self.get_conversation(conversation_id)
        if found is None:
            return None, HistoryWindow(None, [], False)
        return found, window_of(self, conversation_id, limit, None)

    async def tree(self, conversation_id: str) -> Tree | None:
        return tree_of(self, conversation_id)

    async def get_turn(self, turn_id: str) -> Turn | None:
        return self._turns.get(turn_id)

    async def list_turns(self, conversation_id: str) -> list[Turn]:
        return [t for t in self._turns.values() if t.conversation_id == conversation_id]

    async def running_turns(self) -> list[Turn]:
        return [t for t in self._turns.values() if t.status == "running"]

    async def list_tool_calls(
        self, conversation_id: str, *, turn_id: str | None = None
    ) -> list[ToolCallRecord]:
        return [
            r
            for r in self._tool_calls.values()
            if r.conversation_id == conversation_id and (turn_id is None or r.turn_id == turn_id)
        ]

    async def get_approval(self, approval_id: str) -> Approval | None:
        return self._approvals.get(approval_id)

    async def list_approvals(
        self, conversation_id: str | None = None, *, pending_only: bool = False
    ) -> list[Approval]:
        return [
            a
            for a in self._approvals.values()
            if (conversation_id is None or a.conversation_id == conversation_id)
            and (not pending_only or a.status == "pending")
        ]

    async def get_grant(self, grant_id: str) -> Grant | None:
        return self._grants.get(grant_id)

    async def list_grants(
        self,
        *,
        owner: str | None = None,
        conversation_id: str | None = None,
        include_revoked: bool = False,
    ) -> list[Grant]:
        return [
            g
            for g in self._grants.values()
            if (
                (owner is not None and g.owner == owner)
                or (conversation_id is not None and g.conversation_id == conversation_id)
            )
            and (include_revoked or g.revoked_at is None)
        ]

    async def list_queued(self, conversation_id: str | None = None) -> list[QueuedInput]:
        if not self._queue:  # nothing was ever queued (or all of it was dropped)
            return []
        return sorted(
            (
                q
                for q in self._queue.values()
                if q.status == "queued"
                and (conversation_id is None or q.conversation_id == conversation_id)
            ),
            key=lambda q: q.position,
        )

    async def forged_tools(self, owner: str) -> list[ForgedTool]:
        return forged_tools(self, owner)

    async def mcp_servers(self, owner: str) -> list[McpServerRecord]:
        return mcp_servers(self, owner)

    async def forged_tool_versions(self, owner: str, name: str) -> list[ForgedTool]:
        return forged_tool_versions(self, owner, name)

    async def memory_relations(self, scope: str, memory_id: str) -> list[MemoryRelation]:
        return relations_of(self, scope, memory_id)

    async def switched_off_tools(self, scope: str) -> frozenset[str]:
        return frozenset(t for (s, t), on in self._switches.items() if s == scope and not on)

    async def close(self) -> None:
        return None
