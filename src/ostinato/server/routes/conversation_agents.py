"""``/v1/conversations/{id}/agents``: the version of each agent a conversation runs, and
moving it (``ostinato.versions``, ``ostinato.pinning``).

A conversation is pinned to the version of an agent current when it first ran it; its
paused approvals, cards, queued messages and later turns run under that version until it
is moved: ``PATCH`` with a version number, or ``"latest"`` (follow the current version
from now on). A move is refused (409, with the reason) while the conversation waits on a
call whose tool the target version does not have.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body
from pydantic import BaseModel, Field

from ostinato.approvals import SPEND
from ostinato.errors import Conflict, InvalidRequest, NotFound
from ostinato.loop.setup import waiting_card
from ostinato.server.auth import CurrentCaller, owned
from ostinato.server.context import Context
from ostinato.server.schemas import ERROR_RESPONSES, ErrorBody
from ostinato.versions import LATEST, move_refusal

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERROR_RESPONSES,
    409: {
        "model": ErrorBody,
        "description": "The conversation waits on a call whose tool that version lacks.",
    },
}


class AgentPin(BaseModel):
    agent: str
    version: int | None = Field(
        description="The version this conversation runs; null: it follows the latest."
    )
    latest: int = Field(description="The agent's current version.")


class AgentPins(BaseModel):
    agents: list[AgentPin]


class MoveAgents(BaseModel):
    versions: dict[str, int | Literal["latest"]] = Field(
        description='Agent id to a version number, or `"latest"` (follow the current one).',
        max_length=100,
    )


async def pins_of(context: Context, conversation_id: str) -> AgentPins:
    pinning = context.runtime.pinning
    if pinning is None:
        return AgentPins(agents=[])
    pins = await pinning.store.conversation_versions(conversation_id)
    return AgentPins(
        agents=[
            AgentPin(agent=agent, version=number, latest=current.number)
            for agent, number in sorted(pins.items())
            if (current := pinning.current.get(agent)) is not None
        ]
    )


@router.get("/{conversation_id}/agents", response_model=AgentPins, responses=ERROR_RESPONSES)
async def conversation_agents(
    context: Context, caller: CurrentCaller, conversation_id: str
) -> AgentPins:
    """The version of each agent this conversation has run, and each agent's latest."""
    await owned(context.runtime, caller, conversation_id)
    return await pins_of(context, conversation_id)


@router.patch("/{conversation_id}/agents", response_model=AgentPins, responses=_ERRORS)
async def move_agents(
    context: Context,
    caller: CurrentCaller,
    conversation_id: str,
    body: Annotated[MoveAgents, Body()],
) -> AgentPins:
    """Move the conversation to other versions of its agents (a number, or `"latest"`).
    Refused with 409 while it waits on a call (a pending approval, a question card) whose
    tool the target version does not have; 422 for an unknown agent or version."""
    runtime = context.runtime
    await owned(runtime, caller, conversation_id)
    pinning = runtime.pinning
    if pinning is None:
        raise NotFound("this server keeps no agent versions")
    waiting = await _waiting_tools(context, conversation_id)
    moves: dict[str, int | None] = {}
    for agent, wanted in body.versions.items():
        current = pinning.current.get(agent)
        number = current.number if wanted == LATEST and current else wanted
        target = (
            await pinning.store.agent_version(agent, number) if isinstance(number, int) else None
        )
        if target is None:
            raise InvalidRequest(f"agent {agent[:100]!r} has no version {str(wanted)[:20]!r}")
        refusal = move_refusal(waiting, target)
        if refusal is not None:
            raise Conflict(refusal)
        moves[agent] = None if wanted == LATEST else target.number
    await pinning.store.pin_versions(conversation_id, moves, move=True)
    return await pins_of(context, conversation_id)


async def _waiting_tools(context: Context, conversation_id: str) -> list[str]:
    """The tools of the calls the conversation waits on: pending approvals (not a spend
    card: no tool is called) and a question card."""
    store = context.runtime.store
    tools = [
        a.tool
        for a in await store.list_approvals(conversation_id, pending_only=True)
        if a.tool != SPEND
    ]
    window = await store.window(conversation_id, limit=context.runtime.history_limit)
    card = waiting_card(window.rows)
    if card is not None:
        tools.append(card[0].name)
    return tools
