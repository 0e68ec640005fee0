"""Export and import: ``GET /v1/conversations/{id}/export``, ``GET /v1/export`` (every
conversation of the caller) and ``POST /v1/import`` (``ostinato.transfer``).

Exports stream as they are read from the store. An import is read up to
``requests.import_bytes`` (``server.limits``: a 413 past it, before the route), checked
whole, then written in one write: a 422 naming the place stores nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from ostinato.errors import InvalidRequest
from ostinato.server.auth import CurrentCaller, owned
from ostinato.server.context import Context
from ostinato.server.schemas import ERROR_RESPONSES, ErrorBody
from ostinato.store.base import MEMORY_CAPACITY
from ostinato.transfer.exporting import conversation_markdown, export_json, owner_conversations
from ostinato.transfer.importing import import_document, read_document

router = APIRouter(tags=["export"])
Format = Annotated[
    Literal["json", "markdown"],
    Query(description="`json`: the export file (every branch); `markdown`: readable text."),
]
Memories = Annotated[
    bool,
    Query(
        description="Add the caller's memories (current facts) to the export file, under "
        "`memories`; JSON only."
    ),
]
EXPORTED: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The export, streamed.",
        "content": {"application/json": {}, "text/markdown": {}},
    }
}


async def _encoded(pieces: AsyncIterator[str]) -> AsyncIterator[bytes]:
    async for piece in pieces:
        yield piece.encode()


def _download(pieces: AsyncIterator[str], name: str, markdown: bool) -> StreamingResponse:
    kind = "text/markdown; charset=utf-8" if markdown else "application/json"
    suffix = "md" if markdown else "json"
    disposition = f'attachment; filename="{name}.{suffix}"'
    return StreamingResponse(
        _encoded(pieces), media_type=kind, headers={"content-disposition": disposition}
    )


@router.get(
    "/v1/conversations/{conversation_id}/export",
    response_class=StreamingResponse,
    responses={**EXPORTED, **ERROR_RESPONSES},
)
async def export_conversation(
    context: Context,
    caller: CurrentCaller,
    conversation_id: str,
    format: Format = "json",
    memories: Memories = False,
) -> StreamingResponse:
    """One conversation as the export file (every row of every branch, tool calls and
    results, approvals, attachments with their content; with `memories=true` the caller's
    memories too) or as Markdown (the branch it is on, as a person reads it). Another
    owner's is a 404; Markdown with `memories=true` a 422."""
    store = context.runtime.store
    conversation = await owned(context.runtime, caller, conversation_id)
    if format == "markdown":
        if memories:
            raise InvalidRequest("memories: the Markdown export has no memories; use JSON")
        pieces = conversation_markdown(store, conversation)
    else:
        pieces = export_json(store, [conversation], caller.owner, memories=memories)
    return _download(pieces, f"conversation-{conversation_id}", format == "markdown")


@router.get(
    "/v1/export",
    response_class=StreamingResponse,
    responses={
        200: {"description": "The export file, streamed.", "content": {"application/json": {}}}
    },
)
async def export_everything(
    context: Context, caller: CurrentCaller, memories: Memories = False
) -> StreamingResponse:
    """Every conversation of the caller (archived ones too) as one export file; with
    `memories=true`, the caller's memories too."""
    store = context.runtime.store
    owner = None if caller.sees_everything else caller.owner
    conversations = owner_conversations(store, owner)
    pieces = export_json(store, conversations, caller.owner, memories=memories)
    return _download(pieces, "conversations", markdown=False)


class ImportedOut(BaseModel):
    conversations: list[str] = Field(description="The new conversations' ids, in file order.")


IMPORT_BODY = {
    "requestBody": {
        "required": True,
        "description": "An ostinato export file, or ChatGPT's conversations.json.",
        "content": {"application/json": {"schema": {}}},
    }
}


@router.post(
    "/v1/import",
    status_code=201,
    response_model=ImportedOut,
    openapi_extra=IMPORT_BODY,
    responses={
        422: ERROR_RESPONSES[422],
        413: {"model": ErrorBody, "description": "Larger than `requests.import_bytes`."},
        409: {
            "model": ErrorBody,
            "description": "The file's memories would pass the caller's `memory.capacity` "
            "(`memory_full`); nothing is stored.",
        },
    },
)
async def import_file(context: Context, caller: CurrentCaller, request: Request) -> ImportedOut:
    """Import an export file (ours, version 1) or ChatGPT's `conversations.json` as new
    conversations of the caller (and the file's memories, if it has them, as the caller's
    facts), all or nothing: a file in neither format, of another
    version or owner, or with a broken reference is a 422 naming the place, and nothing
    is stored."""
    document = read_document(await request.body(), caller.owner)
    memory = context.runtime.memory
    capacity = MEMORY_CAPACITY if memory is None else memory.capacity
    store = context.runtime.store
    ids = await import_document(store, document, caller.owner, capacity=capacity)
    return ImportedOut(conversations=ids)
