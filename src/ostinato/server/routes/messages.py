"""``/v1/conversations/{id}/messages``: the stored rows, in seq order."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from ostinato.server.auth import CurrentCaller, owned
from ostinato.server.context import Context
from ostinato.server.schemas import ERROR_RESPONSES, SEQ_MAX, MessageOut, MessagePage

router = APIRouter(prefix="/v1/conversations", tags=["messages"])


@router.get("/{conversation_id}/messages", response_model=MessagePage, responses=ERROR_RESPONSES)
async def list_messages(
    context: Context,
    caller: CurrentCaller,
    conversation_id: str,
    after_seq: Annotated[
        int, Query(ge=0, le=SEQ_MAX, description="Only rows with a larger seq.")
    ] = 0,
    limit: Annotated[int | None, Query(ge=1, le=1000)] = None,
    include_hidden: Annotated[
        bool, Query(description="Include rows hidden from the chat (e.g. notes).")
    ] = False,
) -> MessagePage:
    """The stored rows after `after_seq`, in seq order."""
    await owned(context.runtime, caller, conversation_id)
    rows = await context.runtime.store.list_messages(
        conversation_id, after_seq=after_seq, limit=limit, include_hidden=include_hidden
    )
    cut = limit is not None and len(rows) == limit
    return MessagePage(
        messages=[MessageOut.of(row) for row in rows],
        next_after_seq=rows[-1].seq if cut and rows else None,
    )
