"""``/v1/memories``: the caller's long-term facts: list or search, remember, forget.

The owner is the caller (``server.auth``): the facts of one owner are the scope the
memory tools use in that owner's conversations, so what is remembered here is recalled
there and the other way round. Forgetting closes a fact (it leaves
listings and search, and is kept as history: ``include_closed=true`` lists it).
A full scope refuses a new fact with 409 ``memory_full``; nothing is evicted.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from ostinato.errors import NotFound
from ostinato.memory.facts import Memory
from ostinato.server.auth import CurrentCaller
from ostinato.server.context import Context
from ostinato.server.schemas import SPACE, ErrorBody
from ostinato.store.base import MEMORY_SUBJECT_LIMIT, MEMORY_TEXT_LIMIT, MemoryFact

router = APIRouter(prefix="/v1/memories", tags=["memories"])

FACT_PATTERN = f"^[^\\x00]*[^\\x00{SPACE}][^\\x00]*$"  # no NUL, and more than white space

_ERRORS: dict[int | str, dict[str, Any]] = {
    422: {"model": ErrorBody, "description": "The request is malformed."},
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such memory for this owner."},
}
_FULL: dict[int | str, dict[str, Any]] = {
    409: {
        "model": ErrorBody,
        "description": "The owner's memory is full (`memory_full`), or `supersedes` names"
        " a fact already closed (`conflict`).",
    },
}


class MemoryOut(BaseModel):
    """One fact. `valid_to` is null while it is current; `score` comes with searches."""

    id: str
    owner: str
    fact: str
    subject: str | None
    current: bool
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    supersedes: str | None
    superseded_by: str | None
    conversation_id: str | None
    turn_id: str | None
    score: float | None = None

    @classmethod
    def of(cls, fact: MemoryFact, score: float | None = None) -> MemoryOut:
        return cls(
            id=fact.id,
            owner=fact.scope,
            fact=fact.text,
            subject=fact.subject,
            current=fact.current,
            valid_from=fact.valid_from,
            valid_to=fact.valid_to,
            recorded_at=fact.recorded_at,
            supersedes=fact.supersedes,
            superseded_by=fact.superseded_by,
            conversation_id=fact.conversation_id,
            turn_id=fact.turn_id,
            score=score,
        )


class MemoryList(BaseModel):
    memories: list[MemoryOut]


class RememberRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fact: str = Field(
        min_length=1,
        max_length=MEMORY_TEXT_LIMIT,
        description="One self-contained fact.",
        # in the schema only: the store's check says what is wrong in words
        json_schema_extra={"pattern": FACT_PATTERN},
    )
    subject: str | None = Field(
        None,
        max_length=MEMORY_SUBJECT_LIMIT,
        description="A short topic; facts sharing one are checked for conflicts.",
    )
    supersedes: str | None = Field(
        None, max_length=100, description="The id of a current fact this one replaces."
    )


def _memory(context: Context) -> Memory:
    # The deployment's memory (its capacity and ranker), so the API and the tools agree.
    return context.runtime.memory or Memory(context.runtime.store)


@router.get("", response_model=MemoryList, responses=_ERRORS)
async def list_memories(
    context: Context,
    caller: CurrentCaller,
    q: Annotated[
        str | None,
        Query(max_length=1_000, description="Search the current facts for these words."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    include_closed: Annotated[
        bool,
        Query(
            description="Also list forgotten and superseded facts. A listing only: a "
            "search (`q`) covers the current facts."
        ),
    ] = False,
) -> MemoryList:
    """The caller's facts, newest first; with `q`, the current facts matching it, best
    first."""
    owner = caller.owner
    memory = _memory(context)
    if q is not None:
        hits = await memory.recall(owner, q, limit=limit)
        return MemoryList(memories=[MemoryOut.of(h.fact, h.score) for h in hits])
    facts = await memory.list_facts(owner, include_closed=include_closed, limit=limit)
    return MemoryList(memories=[MemoryOut.of(f) for f in facts])


@router.post("", status_code=201, response_model=MemoryOut, responses=_ERRORS | _NOT_FOUND | _FULL)
async def remember(context: Context, caller: CurrentCaller, body: RememberRequest) -> MemoryOut:
    """Remember a fact for the caller; with `supersedes`, the fact it replaces is closed
    and linked to it in the same write."""
    fact = await _memory(context).remember(
        caller.owner, body.fact, subject=body.subject, supersedes=body.supersedes
    )
    return MemoryOut.of(fact)


@router.delete("/{memory_id}", response_model=MemoryOut, responses=_ERRORS | _NOT_FOUND)
async def forget(context: Context, caller: CurrentCaller, memory_id: str) -> MemoryOut:
    """Forget (close) a fact: it leaves listings and search and stays as history. The
    closed fact is returned; forgetting it again returns it unchanged."""
    if len(memory_id) > 100:
        raise NotFound(f"no memory {memory_id[:100]!r}")
    return MemoryOut.of(await _memory(context).forget(caller.owner, memory_id))
