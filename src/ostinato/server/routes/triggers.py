"""``POST /v1/conversations/{id}/triggers``: another system pokes the agent in one of the
caller's conversations. The trigger's text becomes a hidden user row the model sees
(with a note that it came from outside, naming ``source``), and a normal turn answers
it, delivered like a scheduled prompt (``ostinato.background``: the poller fires it at
its next tick, exactly once). With an ``Idempotency-Key``, the same request sent again
answers with the same trigger and makes none.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ostinato.background.schedules import SOURCE_LIMIT, TEXT_LIMIT
from ostinato.server.auth import CurrentCaller, owned
from ostinato.server.context import Context
from ostinato.server.idempotency import (
    Claimed,
    Earlier,
    IdempotencyKey,
    fingerprint,
    request_key,
    stored_answer,
)
from ostinato.server.routes.schedules import ScheduleOut, schedules_of
from ostinato.server.schemas import ErrorBody

router = APIRouter(prefix="/v1/conversations", tags=["schedules"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such conversation for the caller."},
    409: {"model": ErrorBody, "description": "Too many undelivered triggers and schedules."},
    422: {"model": ErrorBody, "description": "The request is malformed, or its key reused."},
}


class TriggerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=TEXT_LIMIT, description="What happened.")
    source: str | None = Field(
        None, max_length=SOURCE_LIMIT, description="Who sends it (shown to the model)."
    )


@router.post(
    "/{conversation_id}/triggers",
    status_code=202,
    response_model=ScheduleOut,
    responses=_ERRORS,
)
async def trigger(
    request: Request,
    context: Context,
    caller: CurrentCaller,
    conversation_id: str,
    body: TriggerRequest,
    idempotency_key: IdempotencyKey = None,
) -> ScheduleOut | JSONResponse:
    """Poke the agent: 202 with the trigger (a one-shot schedule of mode `trigger`, due
    now); its reply arrives in the conversation like any other."""
    await owned(context.runtime, caller, conversation_id)
    store = context.runtime.store
    claimed: Claimed | None = None
    key = request_key(request, None, "")
    if key is not None:
        print_ = fingerprint(request, body.model_dump(mode="json"))
        claim = await context.idempotency.claim(store, caller.owner, key, print_)
        if isinstance(claim, Earlier):
            status, answer = await stored_answer(
                context.idempotency, claim, store, caller.owner, key
            )
            return JSONResponse(answer, status_code=status)
        claimed = claim
    try:
        made = await schedules_of(request, context).trigger(
            caller.owner, conversation_id, body.text, body.source
        )
    except BaseException as exc:
        if claimed is not None:
            await claimed.failed(exc)
        raise
    out = ScheduleOut.of(made)
    if claimed is not None:
        await claimed.answered(202, out.model_dump(mode="json"))
    return out
