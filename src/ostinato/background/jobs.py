"""Idle-gated background jobs: a small registry of jobs that run for an owner while the
owner is away, and the poller that runs each exactly once per stretch of idleness.

A job (``Job``) reads the store and returns what it would change as write ops and
change records (``Outcome``); it writes no chat row and publishes no frame. The poller
(``JobRunner``, in every ``ostinato serve`` whose ``background.jobs.enabled`` is true)
looks every ``poll_seconds`` for owners idle long enough (``Store.idle_owners``), asks
the gate (``gating.admit``) per job, claims the job for the owner with a lease
(``ClaimJob``), runs it, and commits its ops with the run's record and the released
state in one write (``FinishJob``, a compare-and-set on the holder): of two servers that
both ran it, only the one still holding the claim commits anything. Runs that changed
something, made a model call or failed are recorded (``/v1/jobs``), with their cost.

A job's model calls go through its ``Budget``: at most the calls left today under the
job's ``calls_per_day``; a call past them is refused (``Budget.complete`` returns None)
and the job says it left work (``Outcome.wanting``), which waits for the next day.

The jobs themselves are in ``ostinato.memory``: ``consolidation``, ``lapse``,
``episodes``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from ostinato import observe
from ostinato.background.gating import Run, admit, settle
from ostinato.config.background import JobSection, JobsSection
from ostinato.errors import ClientError, ModelError
from ostinato.ids import new_id
from ostinato.messages import JSON, Message, TextBlock
from ostinato.models.assembly import complete
from ostinato.models.base import Model, ModelRequest
from ostinato.spend.gate import SpendGate
from ostinato.spend.seam import GATE
from ostinato.store.base import Store, WriteOp, utcnow
from ostinato.store.jobs import ClaimJob, FinishJob, JobRun, JobState, JobTakenOver

log = logging.getLogger(__name__)

LOOK_BACK = timedelta(days=7)  # owners active longer ago than this are not looked at
CALL_DEADLINE_S = 60.0


class Budget:
    """A job's model calls for one run: at most ``left``; ``calls`` counts those made."""

    def __init__(self, model: Model | None, left: int) -> None:
        self.model, self.left, self.calls = model, left, 0
        self.refused = False

    async def complete(self, system: str, text: str, *, max_tokens: int = 400) -> str | None:
        """One model call's text; None when no call is left (or there is no model)."""
        if self.model is None or self.calls >= self.left:
            self.refused = True
            return None
        self.calls += 1
        request = ModelRequest(
            system=system,
            messages=(Message("user", (TextBlock(text[:12_000]),)),),
            tool_choice="none",
            max_tokens=max_tokens,
        )
        reply = await complete(self.model, request, deadline=CALL_DEADLINE_S, what="job")
        return reply.message.text


@dataclass(frozen=True, slots=True)
class Context:
    owner: str  # also the memory scope of the owner's facts
    now: datetime
    store: Store
    budget: Budget
    notes: JSON  # what the job kept from its last run for this owner
    capacity: int  # current facts a scope may hold


@dataclass(slots=True)
class Outcome:
    ops: list[WriteOp] = field(default_factory=list)
    changes: list[JSON] = field(default_factory=list)
    notes: JSON | None = None  # None: kept as they were
    wanting: bool = False  # work was left for want of model calls


class Job(Protocol):
    name: str

    async def run(self, context: Context) -> Outcome: ...


class JobRunner:
    """Runs ``jobs`` (with their ``settings``) for idle owners of ``store`` as
    ``holder``; ``model`` is the one their calls use (a cheap tier), ``clock`` is now."""

    def __init__(
        self,
        store: Store,
        jobs: Sequence[Job],
        settings: JobsSection,
        *,
        model: Model | None = None,
        holder: str | None = None,
        capacity: int = 5_000,
        clock: Callable[[], datetime] = utcnow,
        spend: SpendGate | None = None,
    ) -> None:
        self.store, self.jobs, self.settings = store, list(jobs), settings
        self.spend = spend  # checks and counts the jobs' calls, charged to their owner
        self.model, self.capacity, self.clock = model, capacity, clock
        self.holder = holder or f"jobs_{new_id()}"
        self.lease = timedelta(seconds=settings.lease_seconds)
        self._stopped = asyncio.Event()

    def settings_of(self, job: Job) -> JobSection:
        found = getattr(self.settings, job.name, None)
        return found if isinstance(found, JobSection) else JobSection(enabled=False)

    async def run(self) -> None:
        while not self._stopped.is_set():
            try:
                await self.tick()
            except Exception:  # the store is away: try again at the next tick
                log.exception("jobs: a tick failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), self.settings.poll_seconds)

    def stop(self) -> None:
        self._stopped.set()

    async def tick(self) -> list[JobRun]:
        """Run every job due now for every owner idle long enough; the runs recorded."""
        now = self.clock()
        enabled = [j for j in self.jobs if self.settings_of(j).enabled]
        if not enabled:
            return []
        shortest = min(self.settings_of(j).idle_minutes for j in enabled)
        owners = await self.store.idle_owners(now - LOOK_BACK, now - timedelta(minutes=shortest))
        done: list[JobRun] = []
        for job in enabled:
            states = {s.owner: s for s in await self.store.job_states(job=job.name)}
            for owner, active in owners:
                gate = admit(self.settings_of(job), states.get(owner), active, now)
                if isinstance(gate, Run):
                    claim = ClaimJob(owner, job.name, self.holder, now, now + self.lease, active)
                    (state,) = await self.store.write(claim)
                    run = None
                    if state is not None:
                        run = await self.run_one(job, state, active, gate.calls_left)
                    if run is not None:
                        done.append(run)
        return done

    async def run_one(
        self, job: Job, state: JobState, active: datetime, calls_left: int
    ) -> JobRun | None:
        """Run a claimed job and commit what it did; its run's record, if one is kept."""
        now, budget = self.clock(), Budget(self.model, calls_left)
        context = Context(state.owner, now, self.store, budget, state.notes, self.capacity)
        error: str | None = None
        paying = GATE.set(self.spend)  # its calls are checked and charged to the owner
        try:
            with observe.job(f"job.{job.name}", owner=state.owner) as scope:
                try:
                    outcome = await job.run(context)
                except (ModelError, ClientError) as exc:
                    outcome, error = Outcome(), f"{type(exc).__name__}: {exc}"
        finally:
            GATE.reset(paying)
        metrics = scope.ledger.snapshot()
        wanting = outcome.wanting or budget.refused
        settled = settle(state, active, now, calls=budget.calls, wanting=wanting)
        if outcome.notes is not None:
            settled = dataclasses.replace(settled, notes=outcome.notes)
        run = self._record(job, state.owner, now, outcome, metrics, error)
        try:
            await self.store.write(*outcome.ops, FinishJob(settled, self.holder, run))
        except JobTakenOver:  # its lease ran out: the process that took it runs it
            log.info("jobs: %s for %s was taken over; nothing kept", job.name, state.owner)
            return None
        except ClientError as exc:  # a fact it acts on changed meanwhile: nothing kept
            return await self._failed(job, settled, now, metrics, str(exc))
        return run

    async def _failed(
        self, job: Job, state: JobState, now: datetime, metrics: JSON, error: str
    ) -> JobRun | None:
        run = self._record(job, state.owner, now, Outcome(), metrics, error)
        try:
            await self.store.write(FinishJob(state, self.holder, run))
        except JobTakenOver:
            return None
        return run

    def _record(
        self,
        job: Job,
        owner: str,
        started: datetime,
        outcome: Outcome,
        metrics: JSON,
        error: str | None,
    ) -> JobRun | None:
        calls = int(metrics.get("model_calls", 0))
        if not outcome.changes and not calls and error is None:
            return None  # nothing to show
        return JobRun(
            id=new_id(),
            owner=owner,
            job=job.name,
            started_at=started,
            finished_at=max(self.clock(), started),
            status="failed" if error else "ok",
            changes=outcome.changes if error is None else [],
            model_calls=calls,
            tokens=int(metrics.get("tokens_total", 0)),
            cost_usd=metrics.get("cost_usd"),
            error=error,
        )
