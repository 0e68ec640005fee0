"""Assistants and threads of the Agent Protocol.

Assistants are the agents: ``ostinato`` (the default agent, or the router's pick) and
each agent by its id, read-only (``search``, ``get``). Threads are the caller's
conversations: created (``metadata``), read, updated (``metadata``), searched (by
``metadata`` and ``status``), their ``state`` (the messages and what waits) and
``history`` (the current state only), and ``copy``: a new thread holding the whole
conversation (every branch, its turns, calls and approvals), made by reading the
conversation's export file back (``ostinato.transfer``). ``prune``, writing a state and
checkpoints are refused (``threads.REFUSED``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Response
from fastapi.responses import JSONResponse

from ostinato.errors import InvalidRequest, NotFound
from ostinato.messages import Message
from ostinato.server.agent_protocol.wire import (
    PREFIX,
    assistant_json,
    messages_of,
    state_json,
    thread_json,
    thread_status,
)
from ostinato.server.auth import Caller, CurrentCaller, owned
from ostinato.server.context import Context, ServerContext
from ostinato.server.waiting import what_waits
from ostinato.store.accounts import UpdateConversation
from ostinato.store.base import Conversation
from ostinato.transfer.exporting import export_json
from ostinato.transfer.importing import import_document, read_document

router = APIRouter(tags=["agent-protocol"])
DEFAULT = "ostinato"
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
Json = Annotated[dict[str, Any] | None, Body()]
REFUSED = {
    "state": "writing a thread's state is not supported: a thread changes by its runs",
}


def assistant_ids(context: ServerContext) -> list[str]:
    return [DEFAULT, *(s.id for s in context.runtime.router.skills)]


def last_seq(rows: list[Message]) -> int:
    return max((r.seq or 0 for r in rows), default=0)


async def thread_of(context: ServerContext, caller: Caller, thread_id: str) -> Conversation:
    return await owned(context.runtime, caller, thread_id)


async def state_of(context: ServerContext, caller: Caller, thread_id: str) -> dict[str, Any]:
    conversation = await thread_of(context, caller, thread_id)
    rows = await context.runtime.store.list_messages(thread_id)
    return state_json(conversation, rows, await what_waits(context.runtime, thread_id))


@router.post(f"{PREFIX}/assistants/search")
async def search_assistants(
    context: Context, caller: CurrentCaller, body: Json = None
) -> JSONResponse:
    """The agents, as assistants."""
    limit = int((body or {}).get("limit") or 10)
    offset = int((body or {}).get("offset") or 0)
    found = [assistant_json(a, a, EPOCH) for a in assistant_ids(context)]
    return JSONResponse(found[offset : offset + limit])


@router.get(f"{PREFIX}/assistants/{{assistant_id}}", responses={404: {}})
async def get_assistant(context: Context, caller: CurrentCaller, assistant_id: str) -> JSONResponse:
    """One agent, as an assistant."""
    if assistant_id not in assistant_ids(context):
        raise NotFound(f"no assistant with id {assistant_id!r}")
    return JSONResponse(assistant_json(assistant_id, assistant_id, EPOCH))


@router.post(f"{PREFIX}/threads", responses={422: {}})
async def create_thread(context: Context, caller: CurrentCaller, body: Json = None) -> JSONResponse:
    """A new thread: a conversation of the caller's."""
    body = body or {}
    if body.get("thread_id"):
        raise InvalidRequest("thread_id cannot be chosen: a new thread gets an id of its own")
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidRequest("metadata must be an object")
    conversation = await context.runtime.create_conversation(
        owner=caller.owner, metadata={"surface": "agent-protocol", **metadata}
    )
    return JSONResponse(thread_json(conversation))


@router.post(f"{PREFIX}/threads/search")
async def search_threads(
    context: Context, caller: CurrentCaller, body: Json = None
) -> JSONResponse:
    """The caller's threads, newest first, whose metadata holds ``metadata`` and whose
    status is ``status`` (when given)."""
    body = body or {}
    wanted = body.get("metadata") or {}
    status = body.get("status")
    limit, offset = int(body.get("limit") or 10), int(body.get("offset") or 0)
    owner = None if caller.sees_everything else caller.owner
    found = await context.runtime.store.list_conversations(owner=owner, limit=200)
    out = []
    for conversation in found:
        if any(conversation.metadata.get(k) != v for k, v in wanted.items()):
            continue
        waiting = await what_waits(context.runtime, conversation.id)
        if status and thread_status(conversation, waiting) != status:
            continue
        out.append(thread_json(conversation, waiting=waiting))
    return JSONResponse(out[offset : offset + limit])


@router.get(f"{PREFIX}/threads/{{thread_id}}", responses={404: {}})
async def get_thread(context: Context, caller: CurrentCaller, thread_id: str) -> JSONResponse:
    """A thread, with its values (messages) and interrupts."""
    state = await state_of(context, caller, thread_id)
    conversation = await thread_of(context, caller, thread_id)
    waiting = await what_waits(context.runtime, thread_id)
    return JSONResponse(thread_json(conversation, state["values"], waiting))


@router.patch(f"{PREFIX}/threads/{{thread_id}}", responses={404: {}, 422: {}})
async def update_thread(
    context: Context, caller: CurrentCaller, thread_id: str, body: Json = None
) -> JSONResponse:
    """Merge ``metadata`` into the thread's."""
    conversation = await thread_of(context, caller, thread_id)
    metadata = (body or {}).get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidRequest("metadata must be an object")
    merged = {**conversation.metadata, **metadata}
    (updated,) = await context.runtime.store.write(UpdateConversation(thread_id, metadata=merged))
    return JSONResponse(thread_json(updated))


@router.get(f"{PREFIX}/threads/{{thread_id}}/state", responses={404: {}})
async def get_state(context: Context, caller: CurrentCaller, thread_id: str) -> JSONResponse:
    """The thread's state: its messages, and the interrupt that waits."""
    return JSONResponse(await state_of(context, caller, thread_id))


@router.post(f"{PREFIX}/threads/{{thread_id}}/history", responses={404: {}})
async def get_history(
    context: Context, caller: CurrentCaller, thread_id: str, body: Json = None
) -> JSONResponse:
    """The thread's states, newest first: its current state (a linear history)."""
    return JSONResponse([await state_of(context, caller, thread_id)])


@router.post(f"{PREFIX}/threads/{{thread_id}}/copy", responses={404: {}})
async def copy_thread(context: Context, caller: CurrentCaller, thread_id: str) -> JSONResponse:
    """A new thread of the same owner holding the thread's whole conversation: its export
    file read back, so the copy has every branch, turn, call and approval, new ids, and
    the original is not touched."""
    conversation = await thread_of(context, caller, thread_id)
    store, owner = context.runtime.store, conversation.owner or caller.owner
    text = "".join([piece async for piece in export_json(store, [conversation], owner)])
    (copy_id,) = await import_document(store, read_document(text, owner), owner)
    copied = await thread_of(context, caller, copy_id)
    state = await state_of(context, caller, copy_id)
    return JSONResponse(
        thread_json(copied, state["values"], await what_waits(context.runtime, copy_id))
    )


@router.post(f"{PREFIX}/threads/{{thread_id}}/state", responses={404: {}, 422: {}})
async def update_state(
    context: Context, caller: CurrentCaller, thread_id: str, body: Json = None
) -> Response:
    """Refused: a thread changes by its runs."""
    await thread_of(context, caller, thread_id)
    raise InvalidRequest(REFUSED["state"])


__all__ = ["messages_of", "router"]
