"""Facts as a graph: a fact's neighbourhood, and conflicts that take relations into account.

A fact's neighbourhood is the facts reachable from it in ``depth`` steps along relations
(``part_of``, ``relates_to``, ``about``, either direction) and ``supersedes`` links
(both the fact it replaced and the fact that replaced it), closed facts included: the
graph shows history. A conflict is a set of current facts with one subject and the same
relation to the same fact (or no relation at all) that say different things: "born on 3
May" and "born on 5 May", both ``about`` Maya. Two birthdays about different people are
not a conflict, though they share the subject. Resolving one keeps the person's choice
and closes the others (``ResolveConflict``), as history.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ostinato.errors import Conflict, NotFound
from ostinato.store.base import MemoryFact, Store
from ostinato.store.relations import RelateFacts, ResolveConflict

MAX_DEPTH = 3
MAX_FACTS = 50  # a graph stops growing here (``truncated`` says so)


@dataclass(frozen=True, slots=True)
class Edge:
    """``source`` is ``relation`` of ``target``; ``supersedes`` points from the newer fact
    to the one it replaced."""

    source: str
    relation: str
    target: str


@dataclass(slots=True)
class MemoryGraph:
    center: str
    facts: list[MemoryFact] = field(default_factory=list)  # the center first, then by distance
    edges: list[Edge] = field(default_factory=list)
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class FactConflict:
    """Current facts of one subject, with the same relation to the same fact (both None
    for facts related to nothing), that say different things. Oldest first."""

    subject: str
    relation: str | None
    target: str | None
    facts: list[MemoryFact]


async def _fact(store: Store, scope: str, memory_id: str) -> MemoryFact:
    fact = await store.get_memory(memory_id)
    if fact is None or fact.scope != scope:
        raise NotFound(f"no memory {memory_id!r}")
    return fact


async def _edges(store: Store, fact: MemoryFact) -> list[Edge]:
    edges = [
        Edge(r.source, r.relation, r.target)
        for r in await store.memory_relations(fact.scope, fact.id)
    ]
    if fact.supersedes:
        edges.append(Edge(fact.id, "supersedes", fact.supersedes))
    if fact.superseded_by:
        edges.append(Edge(fact.superseded_by, "supersedes", fact.id))
    return edges


async def neighbourhood(store: Store, scope: str, memory_id: str, *, depth: int = 1) -> MemoryGraph:
    """The facts within ``depth`` (1 to ``MAX_DEPTH``) steps of a fact, and the edges
    between them; ``NotFound`` for a fact the scope does not have."""
    depth = max(1, min(depth, MAX_DEPTH))
    center = await _fact(store, scope, memory_id)
    graph = MemoryGraph(center.id, [center])
    seen = {center.id: center}
    edges: dict[Edge, None] = {}
    frontier = [center]
    for _ in range(depth):
        following: list[MemoryFact] = []
        for fact in frontier:
            for edge in await _edges(store, fact):
                edges[edge] = None
                for other in (edge.source, edge.target):
                    if other in seen:
                        continue
                    if len(seen) >= MAX_FACTS:
                        graph.truncated = True
                        continue
                    found = await store.get_memory(other)
                    if found is not None and found.scope == scope:
                        seen[other] = found
                        following.append(found)
        graph.facts.extend(following)
        frontier = following
    graph.edges = [e for e in edges if e.source in seen and e.target in seen]
    return graph


async def conflicts(store: Store, scope: str) -> list[FactConflict]:
    """Every conflict of a scope, by subject, then relation and target."""
    found: list[FactConflict] = []
    for group in await store.memory_conflicts(scope):  # one subject, several texts
        keyed: dict[tuple[str | None, str | None], list[MemoryFact]] = {}
        for fact in group.facts:
            outgoing: set[tuple[str | None, str | None]] = {
                (r.relation, r.target)
                for r in await store.memory_relations(scope, fact.id)
                if r.source == fact.id
            }
            for key in sorted(outgoing, key=_key) or [(None, None)]:
                keyed.setdefault(key, []).append(fact)
        found.extend(
            FactConflict(group.subject, relation, target, facts)
            for (relation, target), facts in sorted(keyed.items(), key=_order)
            if len({f.text for f in facts}) > 1
        )
    return found


def _key(key: tuple[str | None, str | None]) -> tuple[str, str]:
    return key[0] or "", key[1] or ""


def _order(item: tuple[tuple[str | None, str | None], list[MemoryFact]]) -> tuple[str, str]:
    return _key(item[0])


async def resolve(store: Store, scope: str, keep: str) -> list[MemoryFact]:
    """Keep ``keep`` and close the facts it conflicts with; returns the closed facts.
    ``Conflict`` when ``keep`` is in no conflict (nothing to resolve)."""
    await _fact(store, scope, keep)
    rivals = _rivals(await conflicts(store, scope), keep)
    if not rivals:
        raise Conflict(f"memory {keep!r} is in no conflict; nothing to resolve")
    (closed,) = await store.write(ResolveConflict(scope, keep, tuple(rivals)))
    assert isinstance(closed, list)
    return closed


def _rivals(found: Iterable[FactConflict], keep: str) -> list[str]:
    rivals: dict[str, None] = {}
    for conflict in found:
        ids = [f.id for f in conflict.facts]
        if keep in ids:
            rivals.update(dict.fromkeys(i for i in ids if i != keep))
    return list(rivals)


async def relate(store: Store, scope: str, source: str, relation: str, target: str) -> Edge:
    """Record that ``source`` is ``relation`` of ``target`` (see ``RelateFacts``)."""
    (made,) = await store.write(RelateFacts(scope, source, relation, target))
    return Edge(made.source, made.relation, made.target)
