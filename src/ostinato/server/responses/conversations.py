"""OpenAI's Conversations API under ``/openai/v1/conversations``: what the ``openai``
SDKs' ``client.conversations`` calls, with ``base_url`` naming ``/openai/v1``.

ostinato's own ``/v1/conversations`` keeps its own shapes, so the two never share a
path: an OpenAI conversation is an ostinato conversation (the same id; a response's
``conversation`` names it), shown in OpenAI's shape here. A request an OpenAI SDK sends
to the native path is refused (``guard``), never read as a native one.

Supported: create (with text ``items``, stored as rows, and ``metadata``), retrieve,
update (``metadata``), and listing a conversation's items (its rows' text as messages,
oldest first or newest first). Deleting a conversation, and adding, reading or deleting
single items, are not served (405 or 404): ostinato keeps every row.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse

from ostinato.errors import ClientError
from ostinato.messages import Message
from ostinato.server.auth import CurrentCaller, owned
from ostinato.server.context import Context
from ostinato.server.responses.acting import store_history
from ostinato.server.responses.docs import OPENAI_ERROR
from ostinato.server.responses.wire import ResponsesError, bad, read_input
from ostinato.store.accounts import UpdateConversation
from ostinato.store.base import Conversation

BASE = "/openai/v1/conversations"
router = APIRouter(tags=["responses"])
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"description": why, "content": {"application/json": {"schema": OPENAI_ERROR}}}
    for code, why in ((400, "Not supported, or a bad body."), (404, "No such conversation."))
}
_BODY = {
    "requestBody": {
        "required": False,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "items": {"type": ["array", "null"], "items": {"type": "object"}},
                        "metadata": {
                            "type": ["object", "null"],
                            "additionalProperties": {"type": "string"},
                        },
                    },
                }
            }
        },
    }
}


def _shape(conversation: Conversation) -> dict[str, Any]:
    shown = {k: v for k, v in conversation.metadata.items() if isinstance(v, str)}
    return {
        "id": conversation.id,
        "object": "conversation",
        "created_at": int(conversation.created_at.timestamp()),
        "metadata": shown,
    }


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        found = json.loads(raw)
    except ValueError as exc:
        raise bad(f"the body is not valid JSON ({exc})") from None
    if not isinstance(found, dict):
        raise bad("the body must be a JSON object")
    metadata = found.get("metadata")
    if metadata is not None and (
        not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values())
    ):
        raise bad("metadata must be an object of strings", "metadata")
    return found


@router.post(BASE, responses=_ERRORS, openapi_extra=_BODY)
async def create_conversation(
    context: Context, caller: CurrentCaller, request: Request
) -> Response:
    """Create a conversation (OpenAI's shape), with the text of `items` as its rows."""
    try:
        body = await _body(request)
        items = body.get("items")
        if items is not None and not isinstance(items, list):
            raise bad("items must be a list of items", "items")
        given = read_input(items or [])
        if given.answers:
            raise bad("items may only be messages", "items")
        conversation = await context.runtime.create_conversation(
            owner=caller.owner, metadata={"surface": "responses", **(body.get("metadata") or {})}
        )
        await store_history(context, conversation.id, given.talk)
        return JSONResponse(_shape(conversation))
    except (ClientError, ResponsesError) as error:
        return _error(error)


@router.get(f"{BASE}/{{conversation_id}}", responses=_ERRORS)
async def get_conversation(
    context: Context, caller: CurrentCaller, conversation_id: str
) -> Response:
    """A conversation, in OpenAI's shape."""
    try:
        return JSONResponse(_shape(await owned(context.runtime, caller, conversation_id)))
    except ClientError as error:
        return _error(error)


@router.post(f"{BASE}/{{conversation_id}}", responses=_ERRORS, openapi_extra=_BODY)
async def update_conversation(
    context: Context, caller: CurrentCaller, conversation_id: str, request: Request
) -> Response:
    """Replace a conversation's metadata."""
    try:
        current = await owned(context.runtime, caller, conversation_id)
        body = await _body(request)
        kept = {k: v for k, v in current.metadata.items() if not isinstance(v, str)}
        metadata = {**kept, **(body.get("metadata") or {})}
        (updated,) = await context.runtime.store.write(
            UpdateConversation(conversation_id, metadata=metadata)
        )
        return JSONResponse(_shape(updated))
    except (ClientError, ResponsesError) as error:
        return _error(error)


@router.get(f"{BASE}/{{conversation_id}}/items", responses=_ERRORS)
async def list_items(
    context: Context,
    caller: CurrentCaller,
    conversation_id: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    order: Annotated[Literal["asc", "desc"], Query()] = "desc",
) -> Response:
    """A conversation's rows as message items (their text)."""
    try:
        await owned(context.runtime, caller, conversation_id)
    except ClientError as error:
        return _error(error)
    rows = await context.runtime.store.list_messages(conversation_id, include_hidden=False)
    items = [_item(row) for row in rows if row.role in ("user", "assistant") and row.text]
    items = items[::-1][:limit] if order == "desc" else items[:limit]
    first, last = (items[0]["id"], items[-1]["id"]) if items else (None, None)
    return JSONResponse(
        {"object": "list", "data": items, "first_id": first, "last_id": last, "has_more": False}
    )


def _item(row: Message) -> dict[str, Any]:
    kind = "input_text" if row.role == "user" else "output_text"
    return {
        "id": f"msg_{row.id}",
        "type": "message",
        "role": row.role,
        "status": "completed",
        "content": [{"type": kind, "text": row.text}],
    }


def _error(error: ClientError | ResponsesError) -> JSONResponse:
    return (error if isinstance(error, ResponsesError) else ResponsesError.of(error)).response()
