"""The memory tools that see facts as a graph: ``relate_memories``, ``memory_graph`` and
``memory_conflicts`` (listing conflicts, and resolving one with the user's choice).

Like the other memory tools they work in the scope of the conversation they run in.
``relate_memories`` and ``memory_conflicts`` (which can resolve) write memory: after
content from elsewhere they ask first, as ``remember`` does. A refusal (an unknown fact,
a closed one, an unknown relation) is a ``ToolError`` whose sentence the model can act
on.
"""

from __future__ import annotations

from typing import Any, Literal

from ostinato.errors import ClientError, ToolError
from ostinato.memory import graph
from ostinato.memory.facts import scope_for
from ostinato.store.base import MemoryFact, Store
from ostinato.tools.base import Tool, ToolContext
from ostinato.tools.functions import function_tool


def _brief(fact: MemoryFact) -> dict[str, Any]:
    out: dict[str, Any] = {"id": fact.id, "fact": fact.text}
    if fact.subject:
        out["subject"] = fact.subject
    out["since"] = fact.valid_from.date().isoformat()
    if not fact.current:
        out["closed"] = fact.valid_to.date().isoformat() if fact.valid_to else True
    return out


def _scope(context: ToolContext) -> str:
    return scope_for(context.owner, context.conversation_id)


def relation_tools(store: Store) -> list[Tool]:
    """``relate_memories``, ``memory_graph`` and ``memory_conflicts`` over ``store``."""
    return [_relate_tool(store), _graph_tool(store), _conflicts_tool(store)]


def _relate_tool(store: Store) -> Tool:
    async def relate_memories(
        memory_id: str,
        relation: Literal["part_of", "relates_to", "about"],
        other_id: str,
        context: ToolContext,
    ) -> dict[str, Any]:
        """Link two remembered facts: the first is part_of, about, or relates_to the
        second (e.g. "Maya was born on 3 May 2019" about "Ann's daughter is Maya"). Facts
        about the same thing can then be found together, and told apart from facts
        about something else.

        Args:
            memory_id: The fact that is part of, about, or related to the other.
            relation: part_of, about or relates_to.
            other_id: The other fact.
        """
        try:
            edge = await graph.relate(store, _scope(context), memory_id, relation, other_id)
        except ClientError as exc:
            raise ToolError(exc.message) from None
        return {"related": {"from": edge.source, "relation": edge.relation, "to": edge.target}}

    return function_tool(relate_memories, category="action", risk="safe", writes_memory=True)


def _graph_tool(store: Store) -> Tool:
    async def memory_graph(memory_id: str, context: ToolContext, depth: int = 1) -> dict[str, Any]:
        """The facts linked to a remembered fact: what it is part of or about, what is
        about it, what it replaced and what replaced it (closed facts are history).

        Args:
            memory_id: The fact at the centre.
            depth: How many links away to look (1 to 3).
        """
        try:
            found = await graph.neighbourhood(store, _scope(context), memory_id, depth=depth)
        except ClientError as exc:
            raise ToolError(exc.message) from None
        out: dict[str, Any] = {
            "center": found.center,
            "memories": [_brief(f) for f in found.facts],
            "links": [
                {"from": e.source, "relation": e.relation, "to": e.target} for e in found.edges
            ],
        }
        if found.truncated:
            out["note"] = f"cut at {graph.MAX_FACTS} facts"
        return out

    return function_tool(memory_graph, category="read", risk="safe")


def _conflicts_tool(store: Store) -> Tool:
    async def memory_conflicts(context: ToolContext, resolve: str | None = None) -> dict[str, Any]:
        """List remembered facts that say different things about the same subject (and
        the same thing, when they are about one). To resolve a conflict, ask the user which
        fact is right, then call again with resolve set to its id: that fact is kept and
        the ones it conflicts with are closed (kept as history).

        Args:
            resolve: The id of the fact the user chose; the facts it conflicts with close.
        """
        scope = _scope(context)
        if resolve is not None:
            try:
                closed = await graph.resolve(store, scope, resolve)
            except ClientError as exc:
                raise ToolError(exc.message) from None
            return {"kept": resolve, "closed": [_brief(f) for f in closed]}
        found = await graph.conflicts(store, scope)
        return {"conflicts": [_conflict(c) for c in found]}

    return function_tool(
        memory_conflicts, category="action", risk="safe", idempotent=False, writes_memory=True
    )


def _conflict(conflict: graph.FactConflict) -> dict[str, Any]:
    out: dict[str, Any] = {"subject": conflict.subject}
    if conflict.relation is not None:
        out["relation"] = conflict.relation
        out["to"] = conflict.target
    out["memories"] = [_brief(f) for f in conflict.facts]
    return out
