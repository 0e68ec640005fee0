"""The in-memory store's background jobs: their writes (``JOB_WRITES``, dispatched by
``memory_writes``) and their reads (``store.jobs``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ostinato.store.base import Conversation
from ostinato.store.jobs import ClaimJob, FinishJob, JobRun, JobState, JobTakenOver, NoteFactsUsed

Undo = list[Callable[[], None]]


def _restore(table: dict[Any, Any], key: Any, undo: Undo) -> None:
    if key in table:
        old = table[key]
        undo.append(lambda: table.__setitem__(key, old))
    else:
        undo.append(lambda: table.pop(key, None))


def claimable(found: JobState, op: ClaimJob) -> bool:
    """Whether a claim takes ``found`` (the rule both engines' statements spell out)."""
    free = found.lease_until is None or found.lease_until <= op.now
    fresh = found.active_at is None or found.active_at < op.active_at
    ready = found.not_before is None or found.not_before <= op.now
    return free and fresh and ready


def _claim(t: Any, op: ClaimJob, undo: Undo) -> JobState | None:
    key = (op.owner, op.job)
    found = t._job_states.get(key) or JobState(op.owner, op.job)
    if not claimable(found, op):
        return None
    _restore(t._job_states, key, undo)
    taken = dataclasses.replace(found, holder=op.holder, lease_until=op.lease_until)
    t._job_states[key] = taken
    return taken


def _finish(t: Any, op: FinishJob, undo: Undo) -> JobState:
    key = (op.state.owner, op.state.job)
    found = t._job_states.get(key)
    if found is None or found.holder != op.holder:
        raise JobTakenOver(f"the job {op.state.job!r} is no longer held by {op.holder!r}")
    _restore(t._job_states, key, undo)
    stored = dataclasses.replace(op.state, holder=None, lease_until=None)
    t._job_states[key] = stored
    if op.run is not None:
        _restore(t._job_runs, op.run.id, undo)
        t._job_runs[op.run.id] = op.run
    return stored


def _note_used(t: Any, op: NoteFactsUsed, undo: Undo) -> None:
    for memory_id in op.memory_ids:
        key = (op.scope, memory_id)
        _restore(t._fact_uses, key, undo)
        t._fact_uses[key] = op.used_at


JOB_WRITES: dict[type, Callable[[Any, Any, Undo], Any]] = {
    ClaimJob: _claim,
    FinishJob: _finish,
    NoteFactsUsed: _note_used,
}


class MemoryJobReads:
    """``store.jobs.JobReads`` for ``MemoryStore``."""

    _job_states: dict[tuple[str, str], JobState]
    _job_runs: dict[str, JobRun]
    _fact_uses: dict[tuple[str, str], datetime]
    _conversations: dict[str, Conversation]

    def _current(self, conversation: Conversation) -> Conversation:
        raise NotImplementedError  # MemoryStore's: with its newest updated_at

    async def job_states(
        self, *, owner: str | None = None, job: str | None = None
    ) -> list[JobState]:
        found = [
            s
            for (o, j), s in self._job_states.items()
            if (owner is None or o == owner) and (job is None or j == job)
        ]
        return sorted(found, key=lambda s: (s.owner, s.job))

    async def job_runs(self, owner: str, *, limit: int = 50) -> list[JobRun]:
        found = [r for r in self._job_runs.values() if r.owner == owner]
        return sorted(found, key=lambda r: (r.started_at, r.id), reverse=True)[:limit]

    async def job_run(self, run_id: str) -> JobRun | None:
        return self._job_runs.get(run_id)

    async def idle_owners(
        self, active_after: datetime, idle_before: datetime
    ) -> list[tuple[str, datetime]]:
        newest: dict[str, datetime] = {}
        for stored in self._conversations.values():
            conversation = self._current(stored)
            owner, at = conversation.owner, conversation.updated_at
            if owner is not None and (owner not in newest or at > newest[owner]):
                newest[owner] = at
        return sorted(
            (owner, at) for owner, at in newest.items() if active_after < at <= idle_before
        )

    async def fact_uses(self, scope: str) -> dict[str, datetime]:
        return {m: at for (s, m), at in self._fact_uses.items() if s == scope}
