"""Relations between long-term memory facts, and resolving conflicts between them.

Beside ``supersedes`` (a fact replaced by another, kept on the fact itself), a fact can
be ``part_of`` another (a detail of a larger fact), ``about`` another (it describes the
person or thing that fact introduces) or simply ``relates_to`` it. A relation links two
facts of one scope and is never removed: like the facts, it is history. Relations with a
closed fact stay, so a graph still shows what a replaced fact was linked to.

``ResolveConflict`` is the person's answer to a conflict (facts that say different
things about the same subject): the fact they keep stays current and the others are
closed, each marked ``superseded_by`` the kept one, in one write.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, TypeAlias, get_args

from ostinato.errors import InvalidRequest

Relation: TypeAlias = Literal["part_of", "relates_to", "about"]
RELATIONS: tuple[str, ...] = get_args(Relation)


@dataclass(frozen=True, slots=True)
class MemoryRelation:
    """``source`` is ``relation`` of ``target`` (e.g. a birthday fact ``about`` Maya)."""

    scope: str
    source: str
    relation: Relation
    target: str
    created_at: datetime


def check_relation(source: str, relation: str, target: str) -> Relation:
    """The relation, checked; ``InvalidRequest`` for an unknown one or a self-link."""
    if relation not in RELATIONS:
        raise InvalidRequest(
            f"unknown relation {relation!r}; one of {', '.join(RELATIONS)} (or supersedes "
            "when remembering a fact that replaces another)"
        )
    if source == target:
        raise InvalidRequest("a fact cannot relate to itself")
    return relation  # type: ignore[return-value]


def missing_target(target: str) -> InvalidRequest:
    """The error for a relation whose ``target`` is no fact of the scope: the request
    is wrong (a 422 naming the field), the fact it acts on (``source``) was found."""
    return InvalidRequest(f"target: no memory {target!r}")


# --- write ops -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RelateFacts:
    """Record that ``source`` is ``relation`` of ``target``; returns the ``MemoryRelation``
    (the one already stored, when the two were so related before). Both facts must be
    current facts of ``scope``: ``NotFound`` for an unknown ``source`` (or another
    scope's), ``InvalidRequest`` for an unknown ``target`` (the request names it, like
    any other field: see ``missing_target``), ``Conflict`` for a closed one,
    ``InvalidRequest`` for an unknown relation."""

    scope: str
    source: str
    relation: str
    target: str


@dataclass(frozen=True, slots=True)
class ResolveConflict:
    """Keep ``keep`` and close each of ``close`` that is still current, marking it
    superseded by ``keep``; returns the closed facts. ``NotFound`` for an unknown fact,
    ``Conflict`` when ``keep`` itself is closed, ``InvalidRequest`` when ``keep`` is
    among ``close``."""

    scope: str
    keep: str
    close: tuple[str, ...]


RelationOp: TypeAlias = RelateFacts | ResolveConflict
RELATION_OPS: tuple[type, ...] = (RelateFacts, ResolveConflict)


class RelationReads(Protocol):
    async def memory_relations(self, scope: str, memory_id: str) -> list[MemoryRelation]:
        """Relations of ``scope`` with ``memory_id`` at either end, oldest first."""
        ...
