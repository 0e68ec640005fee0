"""``/v1/schedules``: the caller's schedules (prompts and reminders at a time, once or
recurring; ``ostinato.background``): list, create in one of the caller's conversations,
delete. Another owner's schedule or conversation is answered like a missing one (404);
over the limit a new one is refused with 409 ``too_many_schedules``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from ostinato.background.schedules import TEXT_LIMIT, Schedules
from ostinato.background.stage_one import conversation_id
from ostinato.server.auth import CurrentCaller, owned
from ostinato.server.context import Context
from ostinato.server.schemas import ErrorBody
from ostinato.store.schedules import Schedule

router = APIRouter(prefix="/v1/schedules", tags=["schedules"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such schedule or conversation for the caller."},
    422: {"model": ErrorBody, "description": "The request is malformed."},
}
_FULL: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorBody, "description": "The caller has as many schedules as the limit."},
}


class ScheduleOut(BaseModel):
    """One schedule. `next_fire` is UTC (null once a one-shot is delivered); `zone` is
    the time zone its times were set in; `state` moves due -> claimed -> ran ->
    delivered (a recurring one goes back to due at its next slot)."""

    id: str
    conversation_id: str
    mode: Literal["prompt", "reminder", "trigger", "run"]
    text: str
    kind: str
    spec: str
    zone: str
    state: str
    next_fire: datetime | None
    created_at: datetime
    fired: int
    last_fired_at: datetime | None
    late_seconds: float | None
    background_conversation_id: str | None = Field(
        None, description="A prompt's: where its stage one runs (readable by its owner)."
    )

    @classmethod
    def of(cls, s: Schedule) -> ScheduleOut:
        return cls(
            id=s.id,
            conversation_id=s.conversation_id,
            mode=s.mode,
            text=s.text,
            kind=s.kind,
            spec=s.spec,
            zone=s.zone,
            state=s.state,
            next_fire=s.next_fire,
            created_at=s.created_at,
            fired=s.fired,
            last_fired_at=s.last_fired_at,
            late_seconds=s.late_seconds,
            background_conversation_id=conversation_id(s) if s.mode == "prompt" else None,
        )


class ScheduleList(BaseModel):
    schedules: list[ScheduleOut]


class ScheduleRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    conversation_id: str = Field(max_length=100, description="Where it fires.")
    when: str = Field(
        min_length=1,
        max_length=200,
        description="'in 20 minutes', an ISO time, 'every 15m', 'daily at 09:00' or a cron "
        "expression ('0 9 * * 1-5').",
    )
    text: str = Field(min_length=1, max_length=TEXT_LIMIT, description="The prompt or reminder.")
    mode: Literal["prompt", "reminder"] = Field(
        "prompt", description="prompt: the agent answers it; reminder: the text is the reply."
    )
    zone: str | None = Field(
        None, max_length=64, description="IANA time zone (default: the server's setting)."
    )


def schedules_of(request: Request, context: Context) -> Schedules:
    """The deployment's ``Schedules`` (``serve`` sets it), or one with default settings."""
    found = getattr(request.app.state, "schedules", None)
    if found is None:
        found = request.app.state.schedules = Schedules(context.runtime.store)
    assert isinstance(found, Schedules)
    return found


@router.get("", response_model=ScheduleList, responses=_ERRORS)
async def list_schedules(request: Request, context: Context, caller: CurrentCaller) -> ScheduleList:
    """The caller's schedules that are not delivered, soonest first."""
    found = await schedules_of(request, context).list(caller.owner)
    return ScheduleList(schedules=[ScheduleOut.of(s) for s in found])


@router.post("", status_code=201, response_model=ScheduleOut, responses=_ERRORS | _FULL)
async def create_schedule(
    request: Request, context: Context, caller: CurrentCaller, body: ScheduleRequest
) -> ScheduleOut:
    """Schedule a prompt or a reminder in one of the caller's conversations."""
    await owned(context.runtime, caller, body.conversation_id)
    made = await schedules_of(request, context).create(
        caller.owner, body.conversation_id, body.when, body.text, mode=body.mode, zone=body.zone
    )
    return ScheduleOut.of(made)


@router.delete("/{schedule_id}", response_model=ScheduleOut, responses=_ERRORS)
async def delete_schedule(
    request: Request, context: Context, caller: CurrentCaller, schedule_id: str
) -> ScheduleOut:
    """Delete one of the caller's schedules; the deleted schedule is returned."""
    return ScheduleOut.of(await schedules_of(request, context).delete(caller.owner, schedule_id))
