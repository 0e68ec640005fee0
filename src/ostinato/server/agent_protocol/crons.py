"""Crons: ``POST /threads/{thread_id}/runs/crons`` (a cron on a thread), ``PATCH`` and
``DELETE /runs/crons/{cron_id}``, ``POST /runs/crons/search`` and ``/count``. A cron is
a ``run`` schedule in the thread's conversation and a record beside it (``cron_record``);
each firing is a turn in that conversation. A stateless cron (``POST /runs/crons``) is
refused. Another owner's cron, thread or a missing one is a 404.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request, Response
from fastapi.responses import JSONResponse

from ostinato.background.schedules import Schedules
from ostinato.errors import InvalidRequest, NotFound
from ostinato.messages import JSON
from ostinato.server.agent_protocol.cron_record import (
    KIND,
    STATELESS,
    CronChange,
    CronRecord,
    CronRequest,
    cron_json,
    matches,
    page,
    query_of,
    read,
)
from ostinato.server.agent_protocol.threads import assistant_ids, thread_of
from ostinato.server.agent_protocol.wire import PREFIX
from ostinato.server.auth import Caller, CurrentCaller
from ostinato.server.context import Context, ServerContext
from ostinato.server.routes.schedules import schedules_of
from ostinato.store.base import utcnow
from ostinato.store.protocol_records import records
from ostinato.store.schedules import Schedule

router = APIRouter(tags=["agent-protocol"])
CRONS = f"{PREFIX}/runs/crons"
SCAN = 1000  # the caller's newest crons a search or a count reads
CronBody = Annotated[
    dict[str, Any],
    Body(
        description="assistant_id, schedule (cron expression), input {messages}, timezone, "
        "enabled, metadata; see docs/clients.md for the fields refused"
    ),
]
QueryBody = Annotated[dict[str, Any] | None, Body()]
_ERRORS: dict[int | str, dict[str, Any]] = {404: {}, 409: {}, 422: {}}


def _assistant(context: ServerContext, assistant_id: str) -> None:
    if assistant_id not in assistant_ids(context):
        raise NotFound(f"no assistant with id {assistant_id!r}")


@router.post(f"{PREFIX}/threads/{{thread_id}}/runs/crons", responses=_ERRORS)
async def create_for_thread(
    request: Request, context: Context, caller: CurrentCaller, thread_id: str, raw: CronBody
) -> JSONResponse:
    """A cron on the thread: at each slot of its schedule its input is a new message in
    the thread, answered by a turn."""
    body: CronRequest = read(CronRequest, raw)
    text = body.text()
    if text is None:
        raise InvalidRequest("a cron needs input.messages: its human message is each run's")
    await thread_of(context, caller, thread_id)
    _assistant(context, body.assistant_id)
    schedules = schedules_of(request, context)
    zone = body.timezone or "UTC"
    enabled = body.enabled is not False
    made = await schedules.create(
        caller.owner, thread_id, body.schedule, text, mode="run", zone=zone, paused=not enabled
    )
    payload = body.payload()
    metadata = dict(body.metadata or {})
    cron = CronRecord(
        made.id, caller.owner, thread_id, body.assistant_id, body.schedule, body.timezone,
        enabled, payload, metadata,
    )  # fmt: skip
    now = utcnow()
    try:
        await records(context.runtime.store).put_record(cron.to_record(now), create=True)
    except BaseException:
        await schedules.delete(caller.owner, made.id)
        raise
    return JSONResponse(cron_json(CronRecord.of(cron.to_record(now)), made))


@router.post(CRONS, responses={422: {}})
async def create_stateless(context: Context, caller: CurrentCaller, raw: CronBody) -> Response:
    """Refused: a stateless cron would make a new thread for each run."""
    raise InvalidRequest(STATELESS)


async def _owned(
    context: ServerContext, caller: Caller, cron_id: str, schedules: Schedules
) -> tuple[CronRecord, Schedule]:
    """One of the caller's crons and its schedule; ``NotFound`` for another's, for none,
    and for one whose schedule is gone (its conversation was deleted)."""
    store = context.runtime.store
    found = await records(store).get_record(KIND, cron_id) if len(cron_id) <= 100 else None
    mine = found is not None and (caller.sees_everything or found.owner == caller.owner)
    schedule = await schedules.store.schedule(cron_id) if mine else None
    if found is None or not mine or schedule is None:
        raise NotFound(f"no cron with id {cron_id[:100]!r}")
    return CronRecord.of(found), schedule


@router.patch(f"{CRONS}/{{cron_id}}", responses=_ERRORS)
async def update_cron(
    request: Request, context: Context, caller: CurrentCaller, cron_id: str, raw: CronBody
) -> JSONResponse:
    """Change a cron: its schedule, time zone, input and enabled are read again from now
    (409 while it fires); its metadata is merged."""
    body: CronChange = read(CronChange, raw)
    schedules = schedules_of(request, context)
    cron, schedule = await _owned(context, caller, cron_id, schedules)
    text = body.text()
    when, enabled = body.schedule or cron.schedule, cron.enabled
    if body.enabled is not None:
        enabled = body.enabled
    if body.model_fields_set & {"schedule", "timezone", "input", "enabled"}:
        zone = body.timezone or cron.timezone or "UTC"
        schedule = await schedules.revise(
            cron.owner, cron.id, when, text or schedule.text, zone, paused=not enabled
        )
    changed = CronRecord(
        cron.id,
        cron.owner,
        cron.thread_id,
        cron.assistant_id,
        when,
        body.timezone or cron.timezone,
        enabled,
        {**cron.payload, **body.payload()},
        {**cron.metadata, **(body.metadata or {})},
        cron.created_at,
    )
    record = changed.to_record(utcnow())
    await records(context.runtime.store).put_record(record)
    return JSONResponse(cron_json(CronRecord.of(record), schedule))


@router.delete(f"{CRONS}/{{cron_id}}", status_code=204, responses={404: {}})
async def delete_cron(
    request: Request, context: Context, caller: CurrentCaller, cron_id: str
) -> Response:
    """Delete a cron: it fires no more (a run it began goes on)."""
    schedules = schedules_of(request, context)
    cron, _ = await _owned(context, caller, cron_id, schedules)
    await schedules.delete(cron.owner, cron.id)
    await records(context.runtime.store).delete_record(KIND, cron.id)
    return Response(status_code=204)


async def _crons(request: Request, context: ServerContext, caller: Caller) -> list[JSON]:
    """The caller's crons (the newest ``SCAN``) whose schedules are still there."""
    found = await records(context.runtime.store).list_records(KIND, owner=caller.owner, limit=SCAN)
    schedules = schedules_of(request, context).store
    live = {s.id: s for s in await schedules.schedules(caller.owner)}
    out = []
    for record in found:
        schedule = live.get(record.id) or await schedules.schedule(record.id)
        if schedule is not None:
            out.append(cron_json(CronRecord.of(record), schedule))
    return out


@router.post(f"{CRONS}/search", responses={422: {}})
async def search_crons(
    request: Request, context: Context, caller: CurrentCaller, raw: QueryBody = None
) -> JSONResponse:
    """The caller's crons that match, sorted (``sort_by``, ``sort_order``), paged."""
    query = query_of(raw)
    return JSONResponse(page(await _crons(request, context, caller), query))


@router.post(f"{CRONS}/count", responses={422: {}})
async def count_crons(
    request: Request, context: Context, caller: CurrentCaller, raw: QueryBody = None
) -> JSONResponse:
    """How many of the caller's crons match."""
    query = query_of(raw)
    crons = await _crons(request, context, caller)
    return JSONResponse(sum(1 for c in crons if matches(c, query)))
