"""Stateless runs: ``POST /runs/stream``, ``/runs/wait`` and ``/runs`` without a thread.

Each makes a new thread (a conversation of the caller's) and runs the turn in it by the
thread's own route (``runs``), so it is refused, limited and streamed exactly as a run in
a thread is. ``on_completion`` says what becomes of the thread: ``delete`` (the default,
as LangGraph's) deletes it once the run has ended and the request that began it is done
with it (a stream closed, a wait answered, a background run's answer sent); ``keep``
leaves it, a thread like any other. A thread made for a run that never began is deleted
either way.

An interrupt ends a stateless run as it ends any run (the stream shows it, a wait answers
it in ``__interrupt__``). With ``delete`` the thread goes with what waited: its turn is
cancelled, so the call that asked never runs. To answer an interrupt, make the run with
``keep`` and resume in its thread (its id is in the answer's ``Content-Location``, and in
a background run's ``thread_id``). ``command`` is refused (a new thread has nothing to
resume); ``if_not_exists`` changes nothing (no thread is named). If the server stops
before a ``delete`` thread is deleted, the thread stays.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from contextlib import suppress
from typing import Any, TypeVar

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ostinato.deletion import ConversationBusy, delete_conversation
from ostinato.errors import Conflict, InvalidRequest, NotFound
from ostinato.server.agent_protocol import runs
from ostinato.server.agent_protocol.record import KIND, RunRecord, run_state
from ostinato.server.agent_protocol.wire import PREFIX
from ostinato.server.auth import Caller, CurrentCaller
from ostinato.server.context import Context, ServerContext
from ostinato.server.sse import FrameStream
from ostinato.store.protocol_records import records

router = APIRouter(tags=["agent-protocol"])
log = logging.getLogger(__name__)
ON_COMPLETION = ("delete", "keep")
IF_NOT_EXISTS = (None, "reject", "create")
POLL = 0.2  # seconds between two looks at a run that has not ended
BUSY_TRIES = 300  # looks (POLL apart) at a thread whose cancelled turn still stops
T = TypeVar("T")
ANSWERS: dict[int | str, dict[str, Any]] = {404: {}, 409: {}, 422: {}, 429: {}}


async def _new_thread(context: ServerContext, caller: Caller, raw: dict[str, Any]) -> str:
    """The new thread's id, once the request is known to be one a thread's route takes."""
    if raw.get("command") is not None:
        raise InvalidRequest(
            "a stateless run makes a new thread, where nothing waits to be resumed: resume "
            'in the thread of the interrupted run (made with on_completion "keep")'
        )
    if (raw.get("on_completion") or "delete") not in ON_COMPLETION:  # null: the default
        raise InvalidRequest(f"on_completion must be one of {list(ON_COMPLETION)}")
    if raw.get("if_not_exists") not in IF_NOT_EXISTS:
        raise InvalidRequest("if_not_exists must be reject or create")
    runs.read(context, raw)  # refused as a thread's run is, before a thread is made
    conversation = await context.runtime.create_conversation(
        owner=caller.owner, metadata={"surface": "agent-protocol"}
    )
    return conversation.id


def _keeps(raw: dict[str, Any]) -> bool:
    return bool(raw.get("on_completion") == "keep")


def _dispose_later(context: ServerContext, thread_id: str, *, runless_only: bool) -> None:
    """Delete the thread once its run has ended (``runless_only``: only if no run began),
    in the background: the runtime holds the work and cancels it when it closes."""
    work = asyncio.ensure_future(_dispose(context, thread_id, runless_only))
    context.runtime.keep(work)


async def _dispose(context: ServerContext, thread_id: str, runless_only: bool) -> None:
    store = context.runtime.store
    found = await records(store).list_records(KIND, conversation_id=thread_id, limit=1)
    if found and runless_only:
        return
    if found:
        run = RunRecord.of(found[0])
        state = await run_state(store, run)
        while not state.done:
            await asyncio.sleep(POLL)
            state = await run_state(store, run)
        with suppress(Conflict, NotFound):  # what waits: nobody can answer it now
            await context.runtime.cancel(thread_id)
    for _ in range(BUSY_TRIES):
        try:
            await delete_conversation(context.runtime, thread_id)
            return
        except ConversationBusy:  # its cancelled turn is still stopping
            await asyncio.sleep(POLL)
        except NotFound:
            return
    log.warning("stateless run's thread %s kept: its turn did not stop", thread_id)


async def _guarded(context: ServerContext, thread_id: str, keep: bool, call: Awaitable[T]) -> T:
    """The thread route's answer; its thread deleted when the run never began, and (not
    ``keep``) once the run has ended, after this request is done with it."""
    try:
        answer = await call
    except BaseException:
        _dispose_later(context, thread_id, runless_only=keep)
        raise
    if not keep and not isinstance(answer, FrameStream):
        _dispose_later(context, thread_id, runless_only=False)
    return answer


@router.post(f"{PREFIX}/runs/stream", responses=ANSWERS)
async def stream_stateless_run(
    context: Context, caller: CurrentCaller, raw: runs.RunBody
) -> FrameStream:
    """Create a run in a new thread and stream it."""
    tid = await _new_thread(context, caller, raw)
    keep = _keeps(raw)
    answer = await _guarded(context, tid, keep, runs.stream_run(context, caller, tid, raw))
    if not keep:
        answer.then(lambda: _dispose_later(context, tid, runless_only=False))
    return answer


@router.post(f"{PREFIX}/runs/wait", responses=ANSWERS)
async def wait_stateless_run(
    context: Context, caller: CurrentCaller, raw: runs.RunBody
) -> JSONResponse:
    """Create a run in a new thread; the thread's values once it ends or waits."""
    tid = await _new_thread(context, caller, raw)
    return await _guarded(context, tid, _keeps(raw), runs.wait_run(context, caller, tid, raw))


@router.post(f"{PREFIX}/runs", responses=ANSWERS)
async def create_stateless_run(
    context: Context, caller: CurrentCaller, raw: runs.RunBody
) -> JSONResponse:
    """Create a run in a new thread, in the background: the answer is the run (with its
    ``thread_id``), its turn goes on."""
    tid = await _new_thread(context, caller, raw)
    return await _guarded(context, tid, _keeps(raw), runs.create_run(context, caller, tid, raw))
