"""``/v1/mcp-servers``: the caller's own MCP servers (streamable HTTP only): list, add,
remove. Their tools are offered to the caller's turns from the next turn on, as
``mcp_<name>_<tool>``, after the built-ins (which they never shadow).

Credentials (``headers``, ``bearer``) are stored encrypted and never shown again: a
listing says only which header names a server has. The URL is vetted like
``http_fetch``'s (no private addresses unless the deployment allows them). Another
owner's server answers like a missing one.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field

from ostinato.errors import ClientError, InvalidRequest, NotFound
from ostinato.server.context import Context
from ostinato.server.routes.owner import AccountOwner, RequestOwner
from ostinato.server.schemas import NO_NUL, ErrorBody
from ostinato.store.mcp_servers import McpServerRecord

if TYPE_CHECKING:  # the MCP SDK loads with the deployment's people's servers, not here
    from ostinato.tools.personal_mcp import PersonalMcp

router = APIRouter(prefix="/v1/mcp-servers", tags=["tools"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    403: {
        "model": ErrorBody,
        "description": "This deployment does not take people's servers, or the caller is "
        "anonymous (`account_required`).",
    },
    404: {"model": ErrorBody, "description": "No such server for this owner."},
    409: {"model": ErrorBody, "description": "The owner has a server of that name."},
    422: {"model": ErrorBody, "description": "A bad name or risk, or a URL refused."},
}


class McpServerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1,
        max_length=30,
        pattern=r"^[a-z][a-z0-9_]*$",
        description="Its tools are called mcp_<name>_<tool>.",
    )
    url: str = Field(
        min_length=1, max_length=2048, pattern=NO_NUL, description="A streamable-HTTP MCP URL."
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="HTTP headers it gets (stored encrypted)."
    )
    bearer: str | None = Field(
        None, max_length=4096, description="A token sent as `Authorization: Bearer ...`."
    )
    risk: Literal["safe", "write", "exec", "network"] | None = Field(
        None, description="Every tool's risk; unset: from the server's annotations."
    )


def _shown(url: str) -> str:
    """``url`` without a user or password (one stored before they were refused)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


class McpServerOut(BaseModel):
    name: str
    url: str
    header_names: list[str] = Field(description="The names of its stored headers.")
    risk: str | None
    created_at: datetime
    tool_prefix: str

    @classmethod
    def of(cls, record: McpServerRecord, personal: PersonalMcp) -> McpServerOut:
        return cls(
            name=record.name,
            url=_shown(record.url),
            header_names=_header_names(record, personal),
            risk=record.risk,
            created_at=record.created_at,
            tool_prefix=f"mcp_{record.name}_",
        )


def _header_names(record: McpServerRecord, personal: PersonalMcp) -> list[str]:
    """The stored headers' names; none when they do not open (the key was changed)."""
    try:
        return sorted(personal.box.open(record.secret))
    except ValueError:
        return []


class McpServerList(BaseModel):
    servers: list[McpServerOut]


class PersonalMcpOff(ClientError):
    status = 403
    code = "forbidden"


def _personal(context: Context) -> PersonalMcp:
    personal: PersonalMcp | None = context.runtime.personal_mcp
    if personal is None:
        raise PersonalMcpOff("this deployment does not take people's MCP servers")
    return personal


@router.get("", response_model=McpServerList, responses=_ERRORS)
async def list_servers(context: Context, owner: RequestOwner) -> McpServerList:
    """The caller's servers, by name (credentials never shown)."""
    personal = _personal(context)
    return McpServerList(
        servers=[McpServerOut.of(r, personal) for r in await personal.servers(owner)]
    )


@router.post("", status_code=201, response_model=McpServerOut, responses=_ERRORS)
async def add_server(context: Context, owner: AccountOwner, body: McpServerIn) -> McpServerOut:
    """Connect a server; its tools are offered from the caller's next turn on. Anonymous
    callers cannot (403)."""
    personal = _personal(context)
    headers = dict(body.headers)
    if body.bearer:
        headers["Authorization"] = f"Bearer {body.bearer}"
    if any("\x00" in k + v or "\n" in k + v or "\r" in k + v for k, v in headers.items()):
        raise InvalidRequest("a header name or value holds a control character")
    from ostinato.tools.personal_mcp import NewServer

    new = NewServer(body.name, body.url, headers, body.risk)
    return McpServerOut.of(await personal.add(owner, new), personal)


@router.delete("/{name}", status_code=204, responses=_ERRORS)
async def remove_server(context: Context, owner: RequestOwner, name: str) -> Response:
    """Remove a server; its tools are not offered from the next turn on."""
    personal = _personal(context)
    if not any(r.name == name for r in await personal.servers(owner)):
        raise NotFound(f"no MCP server named {name[:64]!r}")
    await personal.remove(owner, name)
    return Response(status_code=204)
