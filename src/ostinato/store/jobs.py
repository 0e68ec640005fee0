"""The store's side of idle-gated background jobs (``ostinato.background.jobs``): each
job's state per owner, the record of each run, and when recall last used a fact.

A job's state (``JobState``, one per owner and job) is claimed with a lease before the
job runs (``ClaimJob``) and released by the write that commits what the run changed
(``FinishJob``): that write is a compare-and-set on the holder, so of two servers that
both ran a job only the one still holding it commits; the other's changes roll back
with its refused write. A run is therefore committed at most once per claim, and a
claim lost to a crash is taken again after its lease.

``active_at`` is the owner's last activity the job has run after: a job runs once per
stretch of idleness. ``day`` and ``calls`` count its model calls on one UTC day (the
daily cap); ``not_before`` holds it back (a job out of calls waits for the next day).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, TypeAlias

from ostinato.errors import Conflict
from ostinato.messages import JSON

RunStatus = Literal["ok", "failed"]


@dataclass(frozen=True, slots=True)
class JobState:
    owner: str
    job: str
    holder: str | None = None
    lease_until: datetime | None = None
    active_at: datetime | None = None  # the owner's last activity the job has run after
    last_run_at: datetime | None = None
    day: str | None = None  # the UTC day (YYYY-MM-DD) ``calls`` counts
    calls: int = 0  # model calls made on ``day``
    not_before: datetime | None = None
    notes: JSON = field(default_factory=dict)  # the job's own (e.g. watermarks)


@dataclass(frozen=True, slots=True)
class JobRun:
    """One run of a job for an owner that changed something, made a model call, or
    failed: what it changed (``changes``: one JSON object per change) and its cost."""

    id: str
    owner: str
    job: str
    started_at: datetime
    finished_at: datetime
    status: RunStatus
    changes: list[JSON] = field(default_factory=list)
    model_calls: int = 0
    tokens: int = 0
    cost_usd: float | None = None
    error: str | None = None


class JobTakenOver(Conflict):
    """``FinishJob`` by a holder that no longer holds the job (its lease ran out and
    another process took it): nothing of the write is kept."""


# --- write ops -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClaimJob:
    """Take ``job`` for ``owner`` as ``holder`` until ``lease_until`` if no live lease
    holds it, it has not run after ``active_at``, and ``not_before`` has passed (its
    state is made on the first claim). Returns the claimed ``JobState``, or None."""

    owner: str
    job: str
    holder: str
    now: datetime
    lease_until: datetime
    active_at: datetime


@dataclass(frozen=True, slots=True)
class FinishJob:
    """Store ``state`` (released: no holder, no lease) and ``run`` (if any) while
    ``holder`` still holds the job; ``JobTakenOver`` otherwise, so the whole write (and what
    the run changed, written beside it) rolls back. Returns the stored state."""

    state: JobState
    holder: str
    run: JobRun | None = None


@dataclass(frozen=True, slots=True)
class NoteFactsUsed:
    """Recall returned these facts of ``scope`` at ``used_at`` (the stale-facts job
    reads it)."""

    scope: str
    memory_ids: tuple[str, ...]
    used_at: datetime


JobOp: TypeAlias = ClaimJob | FinishJob | NoteFactsUsed
JOB_OPS: tuple[type, ...] = (ClaimJob, FinishJob, NoteFactsUsed)


class JobReads(Protocol):
    async def job_states(
        self, *, owner: str | None = None, job: str | None = None
    ) -> list[JobState]:
        """The states of ``owner``'s jobs, or of one ``job`` for every owner (or both)."""
        ...

    async def job_runs(self, owner: str, *, limit: int = 50) -> list[JobRun]:
        """``owner``'s recorded runs, newest first."""
        ...

    async def job_run(self, run_id: str) -> JobRun | None: ...

    async def idle_owners(
        self, active_after: datetime, idle_before: datetime
    ) -> list[tuple[str, datetime]]:
        """Owners whose newest conversation change (a row, a state) is after
        ``active_after`` and at or before ``idle_before``, with that time."""
        ...

    async def fact_uses(self, scope: str) -> dict[str, datetime]:
        """When recall last returned each fact of ``scope`` (facts never returned are
        absent)."""
        ...
