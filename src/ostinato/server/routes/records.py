"""What a page needs after a reload that the rows alone do not say: each turn's ending
(``GET /v1/conversations/{id}/turns``), each tool call's status and timing
(``GET .../tool-calls``) and the messages still waiting in the queue (``GET .../queue``).

Live, the frames carry all of it (``turn.finished``, ``tool.finished``, ``input.queued``);
these read the same facts from the store, so a page opened later shows what a page that
watched showed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from ostinato.server.auth import CurrentCaller, owned
from ostinato.server.context import Context
from ostinato.server.schemas import ERROR_RESPONSES
from ostinato.store.base import QueuedInput

router = APIRouter(prefix="/v1/conversations", tags=["records"])

RESULT_LIMIT = 2_000  # as on tool.finished frames; the full result is in the tool row


class TurnRecordOut(BaseModel):
    id: str
    run_id: str
    kind: str
    status: str = Field(description="`running` or `finished`.")
    stop_reason: str | None
    error: str | None
    metrics: dict[str, Any]
    started_at: datetime
    finished_at: datetime | None


class TurnList(BaseModel):
    turns: list[TurnRecordOut]


class ToolCallOut(BaseModel):
    id: str = Field(description="The tool_use id.")
    turn_id: str
    name: str
    input: dict[str, Any]
    status: str
    started_at: datetime
    finished_at: datetime | None
    duration_s: float | None
    result: str | None = Field(description=f"Cut at {RESULT_LIMIT:,} characters.")
    is_error: bool


class ToolCallList(BaseModel):
    tool_calls: list[ToolCallOut]


class QueuedOut(BaseModel):
    id: str
    client_message_id: str | None
    text: str
    position: int
    created_at: datetime
    steer: bool = Field(
        description='Sent with `policy: "steer"`: the running turn takes it before its '
        "next model call."
    )
    status: str = Field(description="`queued` (waiting), or `dropped` once withdrawn.")


def queued_out(q: QueuedInput) -> QueuedOut:
    return QueuedOut(
        id=q.id,
        client_message_id=q.client_message_id,
        text=q.message.text,
        position=q.position,
        created_at=q.created_at,
        steer=q.steer,
        status=q.status,
    )


class QueuedList(BaseModel):
    queued: list[QueuedOut]


@router.get("/{conversation_id}/turns", response_model=TurnList, responses=ERROR_RESPONSES)
async def list_turns(context: Context, caller: CurrentCaller, conversation_id: str) -> TurnList:
    """The conversation's turns, oldest first: kind, stop reason, error and metrics."""
    runtime = context.runtime
    await owned(runtime, caller, conversation_id)
    turns = await runtime.store.list_turns(conversation_id)
    return TurnList(
        turns=[
            TurnRecordOut(
                id=t.id,
                run_id=t.run_id,
                kind=t.kind,
                status=t.status,
                stop_reason=t.stop_reason,
                error=t.error,
                metrics=t.metrics,
                started_at=t.started_at,
                finished_at=t.finished_at,
            )
            for t in turns
        ]
    )


@router.get("/{conversation_id}/tool-calls", response_model=ToolCallList, responses=ERROR_RESPONSES)
async def list_tool_calls(
    context: Context, caller: CurrentCaller, conversation_id: str
) -> ToolCallList:
    """Every tool call of the conversation as it ran: status (`running`, `ok`, `error`,
    `timeout`, `interrupted`, `skipped`), timings and result."""
    runtime = context.runtime
    await owned(runtime, caller, conversation_id)
    calls = await runtime.store.list_tool_calls(conversation_id)
    return ToolCallList(
        tool_calls=[
            ToolCallOut(
                id=c.id,
                turn_id=c.turn_id,
                name=c.name,
                input=c.input,
                status=c.status,
                started_at=c.started_at,
                finished_at=c.finished_at,
                duration_s=c.duration_s,
                result=c.result[:RESULT_LIMIT] if c.result is not None else None,
                is_error=c.is_error,
            )
            for c in calls
        ]
    )


@router.get("/{conversation_id}/queue", response_model=QueuedList, responses=ERROR_RESPONSES)
async def list_queue(context: Context, caller: CurrentCaller, conversation_id: str) -> QueuedList:
    """Messages stored while a turn ran, still waiting for their turn, in order."""
    runtime = context.runtime
    await owned(runtime, caller, conversation_id)
    queued = await runtime.store.list_queued(conversation_id)
    return QueuedList(queued=[queued_out(q) for q in queued])
