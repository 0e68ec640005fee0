"""Background jobs in SQL, for both engines (``store.jobs``): their write statements,
how their ops run (through ``ops.Executor``), and their reads.

A claim is one upsert whose ``DO UPDATE`` has the claim's rule as its ``WHERE``
(``memory_jobs.claimable``: no live lease, not run after this activity, past
``not_before``) and returns the row it took: on PostgreSQL the row lock makes racing
claims take turns, so one of them wins; SQLite has one writer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any, Literal, TypeAlias, assert_never

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ostinato.store.jobs import (
    ClaimJob,
    FinishJob,
    JobOp,
    JobRun,
    JobState,
    JobTakenOver,
    NoteFactsUsed,
)
from ostinato.store.sql.rows import Row, TimeDecoder, dump_json
from ostinato.store.sql.tables import conversations, job_runs, job_states, memory_uses

JobWriteName: TypeAlias = Literal["claim_job", "finish_job", "insert_job_run", "note_fact_used"]
_STATE = tuple(c.name for c in job_states.columns)
_RUN = tuple(c.name for c in job_runs.columns)
_HELD = ("owner", "job", "holder", "lease_until")  # a finish keeps the key, drops the lease


def _p(table: sa.Table, name: str, param: str | None = None) -> sa.BindParameter[Any]:
    return sa.bindparam(param or name, type_=table.c[name].type)


def job_statements(dialect: str) -> dict[Any, sa.Executable]:
    """The write statements of ``store.jobs`` ops for ``dialect``, by ``JobWriteName``."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    t = job_states
    now = _p(t, "lease_until", "now")
    claim = (
        insert(t)
        .values({c: _p(t, c) for c in _STATE})
        .on_conflict_do_update(
            index_elements=["owner", "job"],
            set_={"holder": _p(t, "holder"), "lease_until": _p(t, "lease_until")},
            where=sa.and_(
                sa.or_(t.c.lease_until.is_(None), t.c.lease_until <= now),
                sa.or_(t.c.active_at.is_(None), t.c.active_at < _p(t, "active_at", "active")),
                sa.or_(t.c.not_before.is_(None), t.c.not_before <= now),
            ),
        )
        .returning(*t.columns)
    )
    released: dict[str, Any] = {c: _p(t, c) for c in _STATE if c not in _HELD}
    finish = (
        sa.update(t)
        .where(
            t.c.owner == _p(t, "owner", "b_owner"),
            t.c.job == _p(t, "job", "b_job"),
            t.c.holder == _p(t, "holder", "b_holder"),
        )
        .values(holder=sa.null(), lease_until=sa.null(), **released)
    )
    used = insert(memory_uses).values({c.name: _p(memory_uses, c.name) for c in memory_uses.c})
    return {
        "claim_job": claim,
        "finish_job": finish,
        "insert_job_run": sa.insert(job_runs).values({c: _p(job_runs, c) for c in _RUN}),
        "note_fact_used": used.on_conflict_do_update(
            index_elements=["scope", "memory_id"], set_={"used_at": _p(memory_uses, "used_at")}
        ),
    }


def _state_params(ex: Any, state: JobState) -> dict[str, Any]:
    params: dict[str, Any] = {c: getattr(state, c) for c in _STATE if c != "notes"}
    for name in ("lease_until", "active_at", "last_run_at", "not_before"):
        if params[name] is not None:
            params[name] = ex.time(params[name])
    params["notes"] = dump_json(state.notes)
    return params


def _run_params(ex: Any, run: JobRun) -> dict[str, Any]:
    params: dict[str, Any] = {c: getattr(run, c) for c in _RUN}
    params["started_at"], params["finished_at"] = ex.time(run.started_at), ex.time(run.finished_at)
    params["changes"] = dump_json(run.changes)
    return params


def apply_job_op(ex: Any, op: JobOp) -> Any:
    """Run one ``store.jobs`` op on ``ex`` (an ``ops.Executor``)."""
    match op:
        case ClaimJob():
            fresh = JobState(op.owner, op.job, op.holder, op.lease_until)
            params = _state_params(ex, fresh)
            params |= {"now": ex.time(op.now), "active": ex.time(op.active_at)}
            found = ex.row("claim_job", params)
            return None if found is None else _state(found, ex.read_time)
        case FinishJob(state=state, holder=holder, run=run):
            params = {k: v for k, v in _state_params(ex, state).items() if k not in _HELD}
            params |= {"b_owner": state.owner, "b_job": state.job, "b_holder": holder}
            if not ex.execute("finish_job", params):
                raise JobTakenOver(f"the job {state.job!r} is no longer held by {holder!r}")
            if run is not None:
                ex.execute("insert_job_run", _run_params(ex, run))
            return JobState(**{**_fields(state), "holder": None, "lease_until": None})
        case NoteFactsUsed(scope=scope, memory_ids=ids, used_at=at):
            for memory_id in ids:
                params = {"scope": scope, "memory_id": memory_id, "used_at": ex.time(at)}
                ex.execute("note_fact_used", params)
            return None
        case _:
            assert_never(op)


def _fields(state: JobState) -> dict[str, Any]:
    return {c: getattr(state, c) for c in _STATE}


def _state(row: Row, decode: TimeDecoder) -> JobState:
    values = dict(zip(_STATE, row, strict=True))
    for name in ("lease_until", "active_at", "last_run_at", "not_before"):
        if values[name] is not None:
            values[name] = decode(values[name])
    values["notes"] = json.loads(values["notes"] or "{}")
    return JobState(**values)


def _run(row: Row, decode: TimeDecoder) -> JobRun:
    values = dict(zip(_RUN, row, strict=True))
    values["started_at"], values["finished_at"] = (
        decode(values["started_at"]),
        decode(values["finished_at"]),
    )
    values["changes"] = json.loads(values["changes"] or "[]")
    return JobRun(**values)


_NEWEST = sa.func.max(conversations.c.updated_at)
_BEFORE = sa.bindparam("before", type_=conversations.c.updated_at.type)
_IDLE = (
    sa.select(conversations.c.owner, _NEWEST)
    .where(
        conversations.c.owner.is_not(None),
        conversations.c.updated_at > sa.bindparam("after", type_=conversations.c.updated_at.type),
    )
    .group_by(conversations.c.owner)
    .having(_NEWEST.op("<=")(_BEFORE))
    .order_by(conversations.c.owner)
)
_RUNS = (
    sa.select(job_runs)
    .where(job_runs.c.owner == _p(job_runs, "owner"))
    .order_by(job_runs.c.started_at.desc(), job_runs.c.id.desc())
    .limit(sa.bindparam("limit", type_=sa.Integer()))
)
_ONE_RUN = sa.select(job_runs).where(job_runs.c.id == _p(job_runs, "id"))
_USES = sa.select(memory_uses.c.memory_id, memory_uses.c.used_at).where(
    memory_uses.c.scope == sa.bindparam("scope", type_=memory_uses.c.scope.type)
)


@cache
def _states_of(by_owner: bool, by_job: bool) -> sa.Select[Any]:
    stmt = sa.select(job_states).order_by(job_states.c.owner, job_states.c.job)
    if by_owner:
        stmt = stmt.where(job_states.c.owner == _p(job_states, "owner"))
    if by_job:
        stmt = stmt.where(job_states.c.job == _p(job_states, "job"))
    return stmt


class JobReads:
    """The background-job reads of ``SQLReads``."""

    _decode_time: TimeDecoder
    _bind_time: Any

    async def _fetch(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]:
        raise NotImplementedError

    async def job_states(
        self, *, owner: str | None = None, job: str | None = None
    ) -> list[JobState]:
        if "\x00" in (owner or "") + (job or ""):
            return []
        stmt = _states_of(owner is not None, job is not None)
        found = await self._fetch(stmt, {"owner": owner, "job": job})
        return [_state(r, self._decode_time) for r in found]

    async def job_runs(self, owner: str, *, limit: int = 50) -> list[JobRun]:
        if "\x00" in owner:
            return []
        found = await self._fetch(_RUNS, {"owner": owner, "limit": limit})
        return [_run(r, self._decode_time) for r in found]

    async def job_run(self, run_id: str) -> JobRun | None:
        if "\x00" in run_id:
            return None
        found = await self._fetch(_ONE_RUN, {"id": run_id})
        return _run(found[0], self._decode_time) if found else None

    async def idle_owners(
        self, active_after: datetime, idle_before: datetime
    ) -> list[tuple[str, datetime]]:
        params = {"after": self._bind_time(active_after), "before": self._bind_time(idle_before)}
        found = await self._fetch(_IDLE, params)
        return [(owner, self._decode_time(at)) for owner, at in found]

    async def fact_uses(self, scope: str) -> dict[str, datetime]:
        if "\x00" in scope:
            return {}
        found = await self._fetch(_USES, {"scope": scope})
        return {memory_id: self._decode_time(at) for memory_id, at in found}
