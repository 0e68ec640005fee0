"""``/v1/tools``: the tools a user's turns can be offered, and switching them off or on;
``/v1/tools/sources``: each tool source (built-ins, OpenAPI documents, MCP servers) and
whether it answered the last time it was listed.

Tools are switched per owner (the caller), or per conversation for a conversation
without an owner (``conversation_id``, one of the caller's). A protected tool (by default
``ask_user`` and ``read_attachment``) cannot be switched off (409); a tool the deployment
switched off for everyone stays off. The model is told a switched-off tool is switched off
by the user.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from ostinato.memory.facts import scope_for
from ostinato.server.auth import Caller, CurrentCaller, owned
from ostinato.server.context import Context
from ostinato.server.schemas import NO_NUL, ErrorBody, not_null, refuse_null
from ostinato.switches import ToolSwitchState

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


class SourceOut(BaseModel):
    name: str = Field(description="`builtins`, `openapi:<name>` or `mcp:<name>`.")
    state: Literal["ok", "failed", "not listed yet"]
    tools: int = Field(description="Tools it gave the last time it was listed.")
    error: str | None = Field(description="Why it failed, when it did.")
    checked_at: datetime | None = Field(description="When it was last listed.")


class SourceList(BaseModel):
    sources: list[SourceOut]


class SwitchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: StrictBool
    conversation_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        pattern=NO_NUL,
        description="Switch it for this conversation's scope (its owner's; its own for a "
        "conversation without an owner) rather than the caller's.",
        json_schema_extra=not_null(),
    )

    _not_null = field_validator("conversation_id", mode="before")(refuse_null)


async def _scope(context: Context, caller: Caller, conversation_id: str | None) -> str:
    if conversation_id is None:
        return caller.owner
    conversation = await owned(context.runtime, caller, conversation_id)
    return scope_for(conversation.owner, conversation.id)


@router.get("", response_model=ToolList, responses=_ERRORS)
async def list_tools(
    context: Context,
    caller: CurrentCaller,
    conversation_id: Annotated[
        str | None, Query(min_length=1, max_length=64, pattern=NO_NUL)
    ] = None,
) -> ToolList:
    """Every tool, and whether it is on for the caller (or one of the caller's
    conversations)."""
    scope = await _scope(context, caller, conversation_id)
    return ToolList(tools=[ToolOut.of(s) for s in await context.runtime.tool_switches(scope)])


@router.get("/sources", response_model=SourceList)
async def list_sources(context: Context) -> SourceList:
    """Each tool source and how it fared the last time it was listed (an MCP server is
    listed at the start of each turn): a failed source's tools are left out of turns."""
    return SourceList(
        sources=[
            SourceOut(
                name=s.name, state=s.state, tools=s.tools, error=s.error, checked_at=s.checked_at
            )
            for s in context.runtime.mount.status()
        ]
    )


@router.put("/{name}", response_model=ToolOut, responses=_ERRORS)
async def switch_tool(
    context: Context, caller: CurrentCaller, name: str, body: SwitchRequest
) -> ToolOut:
    """Switch a tool off (`enabled: false`) or back on for the caller; 409 for a protected
    tool, 404 for an unknown one. It takes effect from the next turn."""
    scope = await _scope(context, caller, body.conversation_id)
    return ToolOut.of(await context.runtime.switch_tool(scope, name, enabled=body.enabled))
