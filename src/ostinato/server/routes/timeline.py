"""``GET /v1/conversations/{id}/turns/{turn_id}``: one turn with its timeline.

The timeline is what the turn's ledger recorded when it ended (``ostinato.observe.ledger``):
its steps, each with its model calls and tool calls, every one with its start offset from
the turn's start and its duration; then the calls made for the turn after it ended (fact
extraction). A turn still running, closed by recovery after a crash, or run while
timelines were off (``observability.timeline``), has none (``steps`` is ``null``). The
shape is in docs/api.md.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from ostinato.errors import NotFound
from ostinato.server.auth import CurrentCaller, owned
from ostinato.server.context import Context
from ostinato.server.schemas import ERROR_RESPONSES

router = APIRouter(prefix="/v1/conversations", tags=["records"])


class Timed(BaseModel):
    start_s: float = Field(description="Seconds from the turn's start.")
    duration_s: float | None = Field(description="Seconds; null if it had not ended.")


class ModelCallTiming(Timed):
    purpose: str = Field(description="`step`, `wrap_up`, `router`, `summary`, `extraction`.")
    model: str = Field(description="The `provider:model` id.")
    time_to_first_token_s: float | None
    tokens_in: int
    tokens_out: int
    cache_read_tokens: int
    cache_write_tokens: int
    stop_reason: str | None
    error: str | None = Field(description="The error's code, if the call failed.")
    retries: list[str] = Field(description="The cause of each retried attempt.")
    agent: str | None = Field(description="The sub-agent that made it, if one did.")
    under: str | None = Field(description="The tool call (of this turn) it ran under.")


class ToolCallTiming(Timed):
    id: str = Field(description="The tool_use id (a sub-agent's: `<parent id>/<id>`).")
    name: str
    status: str | None
    approval: str | None = Field(description="The approval's ending, if it asked for one.")
    approval_wait_s: float | None
    agent: str | None
    under: str | None


class StepTiming(Timed):
    index: int = Field(description="0: before the turn's first model call (routing, reads).")
    model_calls: list[ModelCallTiming]
    tool_calls: list[ToolCallTiming]


class TurnTimeline(BaseModel):
    id: str
    conversation_id: str
    run_id: str
    kind: str
    status: str = Field(description="`running` or `finished`.")
    stop_reason: str | None
    error: str | None
    metrics: dict[str, Any]
    started_at: datetime
    finished_at: datetime | None
    duration_s: float | None = Field(description="As the turn measured itself.")
    steps: list[StepTiming] | None = Field(
        description="null until the turn has ended, and for a turn run with timelines off."
    )
    after_turn: list[ModelCallTiming] = Field(
        description="Model calls made for the turn after it ended (fact extraction)."
    )


@router.get(
    "/{conversation_id}/turns/{turn_id}",
    response_model=TurnTimeline,
    responses={**ERROR_RESPONSES, 404: {**ERROR_RESPONSES[404], "description": "No such turn."}},
)
async def get_turn(
    context: Context, caller: CurrentCaller, conversation_id: str, turn_id: str
) -> TurnTimeline:
    """One turn: how it ended, its metrics, and its steps with each model call and tool
    call, every one with its start offset and duration. Another owner's conversation is
    a 404, as a missing one is."""
    runtime = context.runtime
    await owned(runtime, caller, conversation_id)
    turn = await runtime.store.get_turn(turn_id)
    if turn is None or turn.conversation_id != conversation_id:
        raise NotFound(f"no turn {turn_id!r} in conversation {conversation_id!r}")
    timeline = turn.timeline or {}
    return TurnTimeline(
        id=turn.id,
        conversation_id=turn.conversation_id,
        run_id=turn.run_id,
        kind=turn.kind,
        status=turn.status,
        stop_reason=turn.stop_reason,
        error=turn.error,
        metrics=turn.metrics,
        started_at=turn.started_at,
        finished_at=turn.finished_at,
        duration_s=timeline.get("duration_s"),
        steps=timeline.get("steps"),
        after_turn=timeline.get("after_turn", []),
    )
