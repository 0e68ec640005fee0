"""``/v1/conversations``: create, list (newest first, keyset-paged), read one."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query

from ostinato.server.context import Context
from ostinato.server.schemas import (
    ERROR_RESPONSES,
    ConversationOut,
    ConversationPage,
    CreateConversationRequest,
)

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])


@router.post(
    "", status_code=201, response_model=ConversationOut, responses={422: ERROR_RESPONSES[422]}
)
async def create_conversation(
    context: Context,
    body: Annotated[CreateConversationRequest | None, Body()] = None,
) -> ConversationOut:
    """Open a conversation. The body is optional."""
    body = body or CreateConversationRequest()
    conversation = await context.runtime.create_conversation(
        title=body.title, metadata=body.metadata
    )
    return ConversationOut.of(conversation)


@router.get("", response_model=ConversationPage, responses={422: ERROR_RESPONSES[422]})
async def list_conversations(
    context: Context,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    before: Annotated[
        str | None,
        Query(max_length=100, description="The `next` cursor of the previous page."),
    ] = None,
) -> ConversationPage:
    """Conversations, newest first."""
    found = await context.runtime.store.list_conversations(limit=limit + 1, before=before)
    page = found[:limit]
    return ConversationPage(
        conversations=[ConversationOut.of(c) for c in page],
        next=page[-1].id if len(found) > limit else None,
    )


@router.get("/{conversation_id}", response_model=ConversationOut, responses=ERROR_RESPONSES)
async def get_conversation(context: Context, conversation_id: str) -> ConversationOut:
    """One conversation, with its current state."""
    return ConversationOut.of(await context.runtime.conversation(conversation_id))
