"""The messages waiting in a conversation's queue, changed before they run:
``PATCH /v1/conversations/{id}/queue/{queued_id}`` edits one's text, ``DELETE`` withdraws
it (``ostinato.waiting``). Listing them is ``GET …/queue`` (``routes.records``). Each
change is announced with an ``input.changed`` frame; one a turn has taken already is a
409, one that is not this conversation's a 404."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from ostinato.server.auth import CurrentCaller, owned
from ostinato.server.context import Context
from ostinato.server.routes.records import QueuedOut, queued_out
from ostinato.server.schemas import CONFLICT, ERROR_RESPONSES, SPACE

router = APIRouter(prefix="/v1/conversations", tags=["records"])

# some text besides white space, and no NUL (a text column cannot hold one)
QueuedText = Annotated[
    str,
    StringConstraints(
        strict=True, max_length=100_000, pattern=rf"^[^\x00]*[^\x00{SPACE}][^\x00]*$"
    ),
]


class QueuedEdit(BaseModel):
    """A waiting message's new text (its files stay)."""

    model_config = ConfigDict(extra="forbid")
    text: QueuedText = Field(description="The new text; not blank.")


@router.patch(
    "/{conversation_id}/queue/{queued_id}",
    response_model=QueuedOut,
    responses={**ERROR_RESPONSES, **CONFLICT},
)
async def edit_queued(
    context: Context, caller: CurrentCaller, conversation_id: str, queued_id: str, body: QueuedEdit
) -> QueuedOut:
    """Change the text of a message that waits in the queue; 409 once a turn took it."""
    await owned(context.runtime, caller, conversation_id)
    return queued_out(await context.runtime.edit_waiting(conversation_id, queued_id, body.text))


@router.delete(
    "/{conversation_id}/queue/{queued_id}",
    response_model=QueuedOut,
    responses={**ERROR_RESPONSES, **CONFLICT},
)
async def withdraw_queued(
    context: Context, caller: CurrentCaller, conversation_id: str, queued_id: str
) -> QueuedOut:
    """Withdraw a message that waits in the queue: it never runs, and the request that
    sent it (if it still waits) is answered 409. 409 once a turn took it."""
    await owned(context.runtime, caller, conversation_id)
    return queued_out(await context.runtime.withdraw_waiting(conversation_id, queued_id))
