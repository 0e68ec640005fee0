"""``/v1/tools/forged``: the caller's forged tools: list, make (or edit: a new version),
read one's versions, remove.

A person making a tool here needs no approval (they are the person who would approve
it); what the model makes with ``create_tool`` asks them first. Either way the code is
checked and tried once in the sandbox before it is stored, and it can be called as
``my_<name>`` from the next turn. Another owner's tool answers like a missing one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from ostinato.errors import NotFound
from ostinato.server.context import Context
from ostinato.server.routes.owner import ACCOUNT_REQUIRED, AccountOwner, RequestOwner
from ostinato.server.schemas import NO_NUL, ErrorBody
from ostinato.store.forged import DESCRIPTION_LIMIT, ForgedTool, check_name
from ostinato.tools.forge import CODE_LIMIT
from ostinato.tools.forge.forging import forge, remove

router = APIRouter(prefix="/v1/tools/forged", tags=["tools"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such tool for this owner."},
    422: {"model": ErrorBody, "description": "The tool is malformed or failed its trial."},
}


class ForgedOut(BaseModel):
    name: str = Field(description="What the model calls it: my_<name>.")
    version: int
    description: str
    parameters: dict[str, Any]
    code: str
    created_at: datetime
    removed_at: datetime | None

    @classmethod
    def of(cls, tool: ForgedTool) -> ForgedOut:
        return cls(
            name=tool.tool_name,
            version=tool.version,
            description=tool.description,
            parameters=tool.parameters,
            code=tool.code,
            created_at=tool.created_at,
            removed_at=tool.removed_at,
        )


class ForgedList(BaseModel):
    tools: list[ForgedOut]


class ForgeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1,
        max_length=44,
        pattern=r"^(my_)?[a-z][a-z0-9_]{0,40}$",
        description="1 to 41 lower-case letters, digits or _, starting with a letter "
        "(`my_` before it is taken off: it is called my_<name>).",
    )
    description: str = Field(min_length=1, max_length=DESCRIPTION_LIMIT, pattern=NO_NUL)
    parameters: dict[str, Any] = Field(
        description='A JSON schema, `"type": "object"`.',
        json_schema_extra={"required": ["type"], "properties": {"type": {"const": "object"}}},
    )
    code: str = Field(
        min_length=1,
        max_length=CODE_LIMIT,
        pattern=NO_NUL,
        description=f"One JavaScript function expression, at most {CODE_LIMIT:,} bytes.",
    )
    example: dict[str, Any] | None = Field(
        None, description="Arguments to try it with (`{}` when left out)."
    )


class Forged(BaseModel):
    tool: ForgedOut
    tried: dict[str, Any] = Field(description="`arguments` and the `result` of the trial.")


@router.get("", response_model=ForgedList, responses=_ERRORS)
async def list_forged(context: Context, owner: RequestOwner) -> ForgedList:
    """The caller's tools, the newest version of each, by name."""
    return ForgedList(
        tools=[ForgedOut.of(t) for t in await context.runtime.store.forged_tools(owner)]
    )


@router.post("", status_code=201, response_model=Forged, responses={**_ERRORS, **ACCOUNT_REQUIRED})
async def make_forged(context: Context, owner: AccountOwner, body: ForgeRequest) -> Forged:
    """Make a tool, or a new version of one with the same name; it is tried once with
    `example` first (422 with the reason when it fails). Anonymous callers cannot (403)."""
    made = await forge(
        context.runtime.store,
        context.runtime.sandbox,
        owner,
        name=body.name,
        description=body.description,
        parameters=body.parameters,
        code=body.code,
        example=body.example,
    )
    return Forged(
        tool=ForgedOut.of(made.tool), tried={"arguments": made.example, "result": made.result}
    )


@router.get("/{name}", response_model=ForgedList, responses=_ERRORS)
async def forged_versions(context: Context, owner: RequestOwner, name: str) -> ForgedList:
    """Every version of one tool, oldest first (removed ones too)."""
    versions = await context.runtime.store.forged_tool_versions(owner, _name(name))
    if not versions:
        raise NotFound(f"no tool named {name[:64]!r}")
    return ForgedList(tools=[ForgedOut.of(v) for v in versions])


@router.delete("/{name}", response_model=ForgedOut, responses=_ERRORS)
async def remove_forged(context: Context, owner: RequestOwner, name: str) -> ForgedOut:
    """Remove a tool (its versions stay); from the next turn on it is not offered."""
    return ForgedOut.of(await remove(context.runtime.store, owner, _name(name)))


def _name(name: str) -> str:
    try:
        return check_name(name)
    except Exception:
        raise NotFound(f"no tool named {name[:64]!r}") from None
