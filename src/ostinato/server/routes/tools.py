"""``/v1/tools``: the tools a user's turns can be offered, and switching them off or on.

Tools are switched per user (``owner``), or per conversation for a conversation without
an owner (``conversation_id``). A protected tool (by default ``ask_user`` and
``read_attachment``) cannot be switched off (409); a tool the deployment switched off
for everyone stays off. The model is told a switched-off tool is switched off by the user.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from ostinato.errors import InvalidRequest
from ostinato.memory.facts import scope_for
from ostinato.runtime import ToolSwitchState
from ostinato.server.context import Context
from ostinato.server.schemas import NO_NUL, ErrorBody

router = APIRouter(prefix="/v1/tools", tags=["tools"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such tool (or conversation)."},
    409: {"model": ErrorBody, "description": "The tool is protected."},
    422: {"model": ErrorBody, "description": "The request is malformed."},
}


class ToolOut(BaseModel):
    name: str
    enabled: bool
    protected: bool
    deployment_off: bool = Field(description="Switched off for everyone by the deployment.")
    category: str
    risk: str

    @classmethod
    def of(cls, state: ToolSwitchState) -> ToolOut:
        return cls(
            name=state.name,
            enabled=state.enabled,
            protected=state.protected,
            deployment_off=state.deployment_off,
            category=state.category,
            risk=state.risk,
        )


class ToolList(BaseModel):
    tools: list[ToolOut]


class SwitchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: StrictBool
    owner: str | None = Field(default=None, min_length=1, max_length=200, pattern=NO_NUL)
    conversation_id: str | None = Field(default=None, min_length=1, max_length=64)


async def _scope(context: Context, owner: str | None, conversation_id: str | None) -> str:
    if (owner is None) == (conversation_id is None):
        raise InvalidRequest("name exactly one of owner or conversation_id")
    if conversation_id is not None:
        conversation = await context.runtime.conversation(conversation_id)
        return scope_for(conversation.owner, conversation.id)
    assert owner is not None
    return owner


@router.get("", response_model=ToolList, responses=_ERRORS)
async def list_tools(
    context: Context,
    owner: Annotated[str | None, Query(min_length=1, max_length=200, pattern=NO_NUL)] = None,
    conversation_id: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
) -> ToolList:
    """Every tool, and whether it is on for this owner (or ownerless conversation)."""
    scope = await _scope(context, owner, conversation_id)
    return ToolList(tools=[ToolOut.of(s) for s in await context.runtime.tool_switches(scope)])


@router.put("/{name}", response_model=ToolOut, responses=_ERRORS)
async def switch_tool(context: Context, name: str, body: SwitchRequest) -> ToolOut:
    """Switch a tool off (`enabled: false`) or back on for an owner; 409 for a protected
    tool, 404 for an unknown one. It takes effect from the next turn."""
    scope = await _scope(context, body.owner, body.conversation_id)
    return ToolOut.of(await context.runtime.switch_tool(scope, name, enabled=body.enabled))
