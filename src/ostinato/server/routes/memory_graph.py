"""``/v1/memories`` as a graph: relate two facts, a fact's neighbourhood, conflicts, and
resolving one by keeping a fact (``POST /v1/memories/{id}/resolve``: the facts it
conflicts with are closed and kept as history). The owner is ``RequestOwner``; another
owner's fact is not found."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from ostinato.errors import NotFound
from ostinato.memory import graph
from ostinato.memory.facts import Memory
from ostinato.server.context import Context
from ostinato.server.routes.memories import MemoryOut
from ostinato.server.routes.owner import RequestOwner
from ostinato.server.schemas import ErrorBody

router = APIRouter(prefix="/v1/memories", tags=["memories"])

_ID = 100  # longest fact id accepted (ids are 27 characters)
_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such memory for this owner."},
    409: {"model": ErrorBody, "description": "A fact is closed, or in no conflict."},
    422: {
        "model": ErrorBody,
        "description": "The request is malformed, or its `target` is no fact of the caller's.",
    },
}


class Link(BaseModel):
    source: str = Field(description="The fact that is `relation` of `target`.")
    relation: str = Field(description="part_of, relates_to, about, or supersedes.")
    target: str

    @classmethod
    def of(cls, edge: graph.Edge) -> Link:
        return cls(source=edge.source, relation=edge.relation, target=edge.target)


class RelateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    relation: Literal["part_of", "relates_to", "about"]
    target: str = Field(min_length=1, max_length=_ID, description="The other fact.")


class GraphOut(BaseModel):
    center: str
    memories: list[MemoryOut] = Field(description="The center first, then by distance.")
    links: list[Link]
    truncated: bool = Field(description=f"Cut at {graph.MAX_FACTS} facts.")


class ConflictOut(BaseModel):
    subject: str
    relation: str | None = Field(description="The relation the facts share (null: none).")
    target: str | None = Field(description="The fact they are all `relation` of.")
    memories: list[MemoryOut]


class ConflictList(BaseModel):
    conflicts: list[ConflictOut]


class Resolved(BaseModel):
    kept: str
    closed: list[MemoryOut]


def _memory(context: Context) -> Memory:
    return context.runtime.memory or Memory(context.runtime.store)


def _checked(memory_id: str) -> str:
    if len(memory_id) > _ID or "\x00" in memory_id:
        raise NotFound(f"no memory {memory_id[:_ID]!r}")
    return memory_id


@router.get("/conflicts", response_model=ConflictList, responses=_ERRORS)
async def list_conflicts(context: Context, owner: RequestOwner) -> ConflictList:
    """Current facts of one subject (and the same relation to the same fact) that say
    different things."""
    found = await _memory(context).conflicts(owner)
    return ConflictList(
        conflicts=[
            ConflictOut(
                subject=c.subject,
                relation=c.relation,
                target=c.target,
                memories=[MemoryOut.of(f) for f in c.facts],
            )
            for c in found
        ]
    )


@router.post("/{memory_id}/resolve", response_model=Resolved, responses=_ERRORS)
async def resolve_conflict(context: Context, memory_id: str, owner: RequestOwner) -> Resolved:
    """Keep this fact: the facts it conflicts with are closed (superseded by it). 409
    when it is in no conflict."""
    closed = await _memory(context).resolve(owner, _checked(memory_id))
    return Resolved(kept=memory_id, closed=[MemoryOut.of(f) for f in closed])


@router.get("/{memory_id}/graph", response_model=GraphOut, responses=_ERRORS)
async def memory_graph(
    context: Context,
    memory_id: str,
    owner: RequestOwner,
    depth: Annotated[int, Query(ge=1, le=graph.MAX_DEPTH)] = 1,
) -> GraphOut:
    """The facts linked to one within `depth` steps (closed ones too), and the links."""
    found = await _memory(context).graph(owner, _checked(memory_id), depth=depth)
    return GraphOut(
        center=found.center,
        memories=[MemoryOut.of(f) for f in found.facts],
        links=[Link.of(e) for e in found.edges],
        truncated=found.truncated,
    )


@router.post("/{memory_id}/relations", status_code=201, response_model=Link, responses=_ERRORS)
async def relate(
    context: Context, memory_id: str, owner: RequestOwner, body: RelateRequest
) -> Link:
    """Record that this fact is `relation` of `target` (relating them again is a no-op
    that returns the link). 404 when this fact is not the caller's; 422 when `target`
    is not."""
    edge = await _memory(context).relate(owner, _checked(memory_id), body.relation, body.target)
    return Link.of(edge)
