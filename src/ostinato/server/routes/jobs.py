"""``/v1/jobs``: what the idle-gated background jobs did for the caller
(``ostinato.background.jobs``): each job with its settings and its state for the caller,
and the caller's recorded runs (what each changed, its model calls and cost). The jobs
write no chat row and push nothing to chat: this is where their work shows. Another
owner's run is answered like a missing one (404).

The jobs' registry, gate and settings (which load the settings package and the memory
jobs) are imported by the first request here, not with the server.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel

from ostinato.errors import NotFound
from ostinato.messages import JSON
from ostinato.server.auth import CurrentCaller
from ostinato.server.context import Context
from ostinato.server.schemas import ErrorBody
from ostinato.store.base import utcnow
from ostinato.store.jobs import JobRun

if TYPE_CHECKING:
    from ostinato.config.background import JobsSection

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such run for the caller."},
    422: {"model": ErrorBody, "description": "The request is malformed."},
}


class JobOut(BaseModel):
    """One job: its settings, and for the caller when it last ran, the activity it ran
    after (it runs once per stretch of idleness) and its model calls today."""

    name: str
    enabled: bool
    idle_minutes: float
    calls_per_day: int
    last_run_at: datetime | None
    ran_after_activity_at: datetime | None
    calls_today: int
    waiting_until: datetime | None


class JobRunOut(BaseModel):
    """One run that changed something, made a model call, or failed. `changes`: one
    object per change (`action`: merged, superseded, conflict, lapsed, episode, with
    the facts involved)."""

    id: str
    job: str
    started_at: datetime
    finished_at: datetime
    status: Literal["ok", "failed"]
    changes: list[JSON]
    model_calls: int
    tokens: int
    cost_usd: float | None
    error: str | None

    @classmethod
    def of(cls, run: JobRun) -> JobRunOut:
        return cls(
            id=run.id,
            job=run.job,
            started_at=run.started_at,
            finished_at=run.finished_at,
            status=run.status,
            changes=run.changes,
            model_calls=run.model_calls,
            tokens=run.tokens,
            cost_usd=run.cost_usd,
            error=run.error,
        )


class JobsPage(BaseModel):
    jobs: list[JobOut]
    runs: list[JobRunOut]


def jobs_settings(request: Request) -> JobsSection:
    """The deployment's ``[background.jobs]`` (``serve`` sets it), or the defaults."""
    from ostinato.config.background import JobsSection

    found = getattr(request.app.state, "jobs_settings", None)
    return found if isinstance(found, JobsSection) else JobsSection()


@router.get("", response_model=JobsPage, responses=_ERRORS)
async def list_jobs(
    request: Request,
    context: Context,
    caller: CurrentCaller,
    limit: Annotated[int, Query(ge=1, le=200, description="How many runs, newest first.")] = 50,
) -> JobsPage:
    """The jobs, and the caller's runs, newest first."""
    from ostinato.background.gating import calls_today
    from ostinato.background.registry import NAMES
    from ostinato.config.background import JobSection

    store, settings, now = context.runtime.store, jobs_settings(request), utcnow()
    states = {s.job: s for s in await store.job_states(owner=caller.owner)}
    jobs = []
    for name in NAMES:
        job: JobSection = getattr(settings, name)
        state = states.get(name)
        jobs.append(
            JobOut(
                name=name,
                enabled=job.enabled,
                idle_minutes=job.idle_minutes,
                calls_per_day=job.calls_per_day,
                last_run_at=state.last_run_at if state else None,
                ran_after_activity_at=state.active_at if state else None,
                calls_today=calls_today(state, now),
                waiting_until=state.not_before if state else None,
            )
        )
    runs = await store.job_runs(caller.owner, limit=limit)
    return JobsPage(jobs=jobs, runs=[JobRunOut.of(r) for r in runs])


@router.get("/runs/{run_id}", response_model=JobRunOut, responses=_ERRORS)
async def get_run(context: Context, caller: CurrentCaller, run_id: str) -> JobRunOut:
    """One of the caller's runs."""
    found = await context.runtime.store.job_run(run_id) if len(run_id) <= 100 else None
    if found is None or found.owner != caller.owner:
        raise NotFound(f"no job run {run_id[:100]!r}")
    return JobRunOut.of(found)
