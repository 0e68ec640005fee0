"""``Memory``: long-term facts for the tools and the API, over any ``Store``.

It adds to the store's ops and reads what both callers share: the scope of a tool call,
the capacity, and recall (full-text ranking, fused with embeddings when a ``Ranker`` is
set; the newest facts when a query has no words to search for).
"""

from __future__ import annotations

import logging
from datetime import date

from ostinato.memory import graph
from ostinato.memory.graph import Edge, FactConflict, MemoryGraph
from ostinato.memory.ranking import EmbeddingCache, Ranker, hybrid_search
from ostinato.store.base import (
    MEMORY_CAPACITY,
    ForgetFact,
    MemoryFact,
    MemoryHit,
    RememberFact,
    Store,
    utcnow,
)
from ostinato.store.jobs import NoteFactsUsed
from ostinato.store.search import search_terms

log = logging.getLogger("ostinato.memory")
USED_CACHE = 100_000  # facts whose use was noted today, kept to skip writing them again


def scope_for(owner: str | None, conversation_id: str) -> str:
    """Whose facts a conversation reads and writes: its owner's, or, for a conversation
    without an owner, its own (``conversation:<id>``)."""
    return owner or f"conversation:{conversation_id}"


class Memory:
    """Facts of any scope in ``store``; ``capacity`` current facts per scope (by default
    ``MEMORY_CAPACITY``; the deployment passes the setting ``memory.capacity``)."""

    def __init__(
        self,
        store: Store,
        ranker: Ranker | None = None,
        *,
        capacity: int | None = None,
    ) -> None:
        self.store = store
        self.ranker = ranker
        self.capacity = capacity if capacity is not None else MEMORY_CAPACITY
        self._vectors = EmbeddingCache()
        self._used: dict[tuple[str, str], date] = {}  # (scope, fact) -> the day noted

    async def remember(
        self,
        scope: str,
        text: str,
        *,
        subject: str | None = None,
        supersedes: str | None = None,
        conversation_id: str | None = None,
        turn_id: str | None = None,
    ) -> MemoryFact:
        """Record a fact (closing ``supersedes`` in the same write); ``MemoryFull``,
        ``NotFound``, ``Conflict`` or ``InvalidRequest`` when it cannot be."""
        op = RememberFact(
            scope,
            text,
            subject=subject,
            supersedes=supersedes,
            conversation_id=conversation_id,
            turn_id=turn_id,
            capacity=self.capacity,
        )
        (fact,) = await self.store.write(op)
        assert isinstance(fact, MemoryFact)
        return fact

    async def forget(self, scope: str, memory_id: str) -> MemoryFact:
        """Close a fact of ``scope``; ``NotFound`` if it has none by that id."""
        (fact,) = await self.store.write(ForgetFact(scope, memory_id))
        assert isinstance(fact, MemoryFact)
        return fact

    async def recall(
        self, scope: str, query: str, *, limit: int = 10, use: bool = True
    ) -> list[MemoryHit]:
        """Current facts for ``query``, best first. A query without words to search
        for recalls the newest facts (score 0). ``use``: the facts found are used (the
        stale-facts job counts from their last use; ``note_used``)."""
        if not search_terms(query):
            hits = [MemoryHit(f, 0.0) for f in await self.store.list_memories(scope, limit=limit)]
        elif self.ranker is None:
            hits = await self.store.search_memories(scope, query, limit=limit)
        else:
            hits = await hybrid_search(
                self.store, self.ranker, scope, query, limit=limit, cache=self._vectors
            )
        if use and hits:
            await self.note_used(scope, [hit.fact.id for hit in hits])
        return hits

    async def note_used(self, scope: str, memory_ids: list[str]) -> None:
        """Record that recall returned these facts now: one write for the facts not
        noted today by this ``Memory`` (a failed write is logged, never raised)."""
        now = utcnow()
        today = now.date()
        fresh = tuple(m for m in memory_ids if self._used.get((scope, m)) != today)
        if not fresh:
            return
        try:
            await self.store.write(NoteFactsUsed(scope, fresh, now))
        except Exception:  # recall answers anyway; the fact may lapse a little early
            log.exception("could not note the use of %d facts", len(fresh))
            return
        if len(self._used) > USED_CACHE:
            self._used.clear()
        self._used.update(((scope, m), today) for m in fresh)

    async def list_facts(
        self, scope: str, *, include_closed: bool = False, limit: int = 100
    ) -> list[MemoryFact]:
        return await self.store.list_memories(scope, include_closed=include_closed, limit=limit)

    async def conflicts(self, scope: str) -> list[FactConflict]:
        """Current facts of one subject and the same relation that say different
        things (see ``graph``)."""
        return await graph.conflicts(self.store, scope)

    async def resolve(self, scope: str, keep: str) -> list[MemoryFact]:
        """Keep ``keep`` and close the facts it conflicts with (the closed ones)."""
        return await graph.resolve(self.store, scope, keep)

    async def graph(self, scope: str, memory_id: str, *, depth: int = 1) -> MemoryGraph:
        """The facts linked to ``memory_id`` within ``depth`` steps."""
        return await graph.neighbourhood(self.store, scope, memory_id, depth=depth)

    async def relate(self, scope: str, source: str, relation: str, target: str) -> Edge:
        """Record that ``source`` is ``relation`` of ``target``."""
        return await graph.relate(self.store, scope, source, relation, target)
