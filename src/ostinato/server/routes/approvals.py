"""Consent: ``/v1/conversations/{id}/approvals`` (decide, list the audit trail) and
``/v1/conversations/{id}/grants`` (the remembered approvals: list, revoke)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from ostinato.server.auth import CurrentCaller, owned
from ostinato.server.context import Context
from ostinato.server.schemas import (
    CONFLICT,
    ERROR_RESPONSES,
    ApprovalList,
    ApprovalOut,
    DecisionRequest,
    GrantList,
    GrantOut,
)
from ostinato.store.base import utcnow

router = APIRouter(prefix="/v1/conversations", tags=["approvals"])


@router.post(
    "/{conversation_id}/approvals/{approval_id}",
    response_model=ApprovalOut,
    responses={**ERROR_RESPONSES, **CONFLICT},
)
async def decide(
    context: Context,
    caller: CurrentCaller,
    conversation_id: str,
    approval_id: str,
    body: DecisionRequest,
) -> ApprovalOut:
    """Approve or decline a tool call that waits for consent (an `approval.requested`
    frame). The tool runs at most once: a second decision is a 409."""
    runtime = context.runtime
    await owned(runtime, caller, conversation_id)
    decided = await runtime.decide(
        conversation_id,
        approval_id,
        approve=body.decision == "approve",
        remember=body.remember,
        expires_in=body.expires_in_s,
    )
    return ApprovalOut.of(decided)


@router.get("/{conversation_id}/approvals", response_model=ApprovalList, responses=ERROR_RESPONSES)
async def list_approvals(
    context: Context,
    caller: CurrentCaller,
    conversation_id: str,
    pending: Annotated[bool, Query(description="Only those still waiting for a person.")] = False,
) -> ApprovalList:
    """The conversation's approvals, oldest first: every request and how it ended."""
    runtime = context.runtime
    await owned(runtime, caller, conversation_id)
    found = await runtime.store.list_approvals(conversation_id, pending_only=pending)
    return ApprovalList(approvals=[ApprovalOut.of(a) for a in found])


@router.get("/{conversation_id}/grants", response_model=GrantList, responses=ERROR_RESPONSES)
async def list_grants(context: Context, caller: CurrentCaller, conversation_id: str) -> GrantList:
    """The grants in force for this conversation (its own, and its owner's): not revoked,
    not expired."""
    await owned(context.runtime, caller, conversation_id)
    now = utcnow()
    grants = await context.runtime.list_grants(conversation_id)
    active = [g for g in grants if g.expires_at is None or g.expires_at > now]
    return GrantList(grants=[GrantOut.of(g) for g in active])


@router.delete(
    "/{conversation_id}/grants/{grant_id}",
    status_code=204,
    response_class=Response,
    responses={404: {**ERROR_RESPONSES[404], "description": "No such conversation or grant."}},
)
async def revoke_grant(
    context: Context, caller: CurrentCaller, conversation_id: str, grant_id: str
) -> Response:
    """Revoke a grant: the calls it covered ask again."""
    await owned(context.runtime, caller, conversation_id)
    await context.runtime.revoke_grant(conversation_id, grant_id)
    return Response(status_code=204)
