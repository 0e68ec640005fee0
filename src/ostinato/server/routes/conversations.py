"""``/v1/conversations``: create, list (newest first, keyset-paged), read one, change its
settings. Each is the caller's own: a conversation is created for the caller, listed for
the caller, and another owner's answers like a missing one."""

from __future__ import annotations

import dataclasses
from typing import Annotated

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import JSONResponse

from ostinato import deletion
from ostinato.background.stage_one import is_background
from ostinato.errors import InvalidRequest
from ostinato.runtime import Runtime
from ostinato.server.auth import CurrentCaller, owned
from ostinato.server.auth.caller import signed_in
from ostinato.server.context import Context, context_of
from ostinato.server.conversation_schemas import (
    ConversationOut,
    ConversationPage,
    CreateConversationRequest,
    UpdateConversationRequest,
)
from ostinato.server.idempotency import (
    Claimed,
    Earlier,
    IdempotencyKey,
    fingerprint,
    request_key,
    stored_answer,
)
from ostinato.server.schemas import CONFLICT, ERROR_RESPONSES, MODEL_NOT_ALLOWED, NO_NUL
from ostinato.store.accounts import UpdateConversation
from ostinato.store.base import utcnow

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])


@router.post(
    "",
    status_code=201,
    response_model=ConversationOut,
    responses={422: ERROR_RESPONSES[422], **CONFLICT, **MODEL_NOT_ALLOWED},
)
async def create_conversation(
    request: Request,
    body: Annotated[CreateConversationRequest | None, Body()] = None,
    idempotency_key: IdempotencyKey = None,
) -> ConversationOut | JSONResponse:
    """Open a conversation, owned by the caller. The body is optional. With an
    `Idempotency-Key`, the same request sent again answers with the same conversation
    (and creates none); another request with that key is a 422."""
    context, caller = context_of(request), signed_in(request)  # no dependencies: hot
    body = body or CreateConversationRequest()
    if isinstance(model := (body.metadata or {}).get("model"), str):
        context.check_model(model)  # metadata.model is the conversation's model
    store = context.runtime.store
    claimed: Claimed | None = None
    key = request_key(request, None, "")
    if key is not None:
        print_ = fingerprint(request, body.model_dump(mode="json"))
        claim = await context.idempotency.claim(store, caller.owner, key, print_)
        if isinstance(claim, Earlier):
            status, answer = await stored_answer(
                context.idempotency, claim, store, caller.owner, key
            )
            return JSONResponse(answer, status_code=status)
        claimed = claim
    try:
        conversation = await context.runtime.create_conversation(
            owner=caller.owner, title=body.title, metadata=body.metadata
        )
    except BaseException as exc:
        if claimed is not None:
            await claimed.failed(exc)
        raise
    out = ConversationOut.of(conversation)
    if claimed is not None:
        await claimed.answered(201, out.model_dump(mode="json"))
    return out


@router.get("", response_model=ConversationPage, responses={422: ERROR_RESPONSES[422]})
async def list_conversations(
    context: Context,
    caller: CurrentCaller,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    before: Annotated[
        str | None,
        Query(
            max_length=100, pattern=NO_NUL, description="The `next` cursor of the previous page."
        ),
    ] = None,
    archived: Annotated[
        bool,
        Query(description="List the archived conversations (only those) instead."),
    ] = False,
) -> ConversationPage:
    """The caller's conversations, newest first, archived ones left out unless asked
    for (then only those). A scheduled prompt's background conversation (where its stage
    one runs) is left out: a page may hold fewer than `limit` then, and `next` still
    goes on from it."""
    owner = None if caller.sees_everything else caller.owner
    found = await context.runtime.store.list_conversations(
        owner=owner, limit=limit + 1, before=before, archived=archived
    )
    page = found[:limit]
    return ConversationPage(
        conversations=[ConversationOut.of(c) for c in page if not is_background(c)],
        next=page[-1].id if len(found) > limit else None,
    )


@router.get("/{conversation_id}", response_model=ConversationOut, responses=ERROR_RESPONSES)
async def get_conversation(
    context: Context, caller: CurrentCaller, conversation_id: str
) -> ConversationOut:
    """One conversation, with its current state."""
    return ConversationOut.of(await owned(context.runtime, caller, conversation_id))


@router.patch(
    "/{conversation_id}",
    response_model=ConversationOut,
    responses={**ERROR_RESPONSES, **MODEL_NOT_ALLOWED},
)
async def update_conversation(
    context: Context, caller: CurrentCaller, conversation_id: str, body: UpdateConversationRequest
) -> ConversationOut:
    """Change the title, metadata, persona or model, pin it or archive it; a field left
    out stays as it is, and `null` clears it. `model` (a tier or a `provider:model` id)
    is checked before it is kept: one callers may not choose is a 403 listing those they
    may (`GET /v1/models`, `choosable`), one that cannot be used a 422 saying why.
    `metadata` replaces the metadata whole, except `model`, which only the `model`
    field sets."""
    runtime = context.runtime
    current = await owned(runtime, caller, conversation_id)
    fields = body.model_fields_set
    if "persona" in fields and body.persona is not None:
        _check_persona(runtime, body.persona)
    metadata = dict(body.metadata or {}) if "metadata" in fields else dict(current.metadata)
    metadata.pop("model", None)
    model = body.model if "model" in fields else current.metadata.get("model")
    if "model" in fields and body.model is not None:
        context.check_model(body.model)
        _check_model(runtime, body.model)
    if model is not None:
        metadata["model"] = model
    op = UpdateConversation(conversation_id, metadata=metadata)
    if "title" in fields:
        op = dataclasses.replace(op, title=body.title)
    if "persona" in fields:
        op = dataclasses.replace(op, persona=body.persona)
    if body.pinned is not None:
        op = dataclasses.replace(op, pinned=body.pinned)
    if body.archived is not None and body.archived != (current.archived_at is not None):
        op = dataclasses.replace(op, archived_at=utcnow() if body.archived else None)
    (updated,) = await runtime.store.write(op)
    return ConversationOut.of(updated)


@router.delete(
    "/{conversation_id}",
    status_code=204,
    responses={**ERROR_RESPONSES, **CONFLICT},
)
async def delete_conversation(
    context: Context, caller: CurrentCaller, conversation_id: str
) -> None:
    """Delete the conversation for good: its messages (and their search entries), turns
    and timelines, tool calls, approvals, grants, queued messages, summaries, schedules,
    the facts of its own memory, and the files of its workdir. A conversation whose turn
    is running is a 409 `conversation_busy` (cancel the turn first)."""
    await owned(context.runtime, caller, conversation_id)
    await deletion.delete_conversation(context.runtime, conversation_id)


def _check_persona(runtime: Runtime, persona: str) -> None:
    known = sorted({s.persona for s in runtime.router.skills if s.persona})
    if persona.lower() not in {p.lower() for p in known}:
        offered = ", ".join(known) if known else "none: this server's agents have no persona"
        raise InvalidRequest(f"unknown persona {persona!r} (known: {offered})")


def _check_model(runtime: Runtime, model: str) -> None:
    if runtime.models is None:
        raise InvalidRequest(
            "this server answers every conversation with its one model; "
            "a conversation cannot choose another"
        )
    try:
        runtime.models(model)
    except Exception as exc:  # unknown tier or provider, no key for it, ...
        reason = getattr(exc, "message", None) or str(exc)
        raise InvalidRequest(
            f"the model {model!r} cannot be used: {reason}. Name a tier (e.g. allegro) or a "
            "provider:model id whose provider this server has a key for"
        ) from None
