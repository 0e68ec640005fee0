"""The store's side of per-person MCP servers: the streamable-HTTP servers a person
connected for their own agent (``/v1/mcp-servers``), one row per (owner, name).

The credentials (the HTTP headers the server gets, a bearer token among them) are stored
only encrypted (``secret``: a Fernet token made by ``ostinato.tools.personal_mcp``); the
store never sees them in the clear.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeAlias

from ostinato.errors import InvalidRequest

NAME = re.compile(r"^[a-z][a-z0-9_]{0,29}$")


@dataclass(frozen=True, slots=True)
class McpServerRecord:
    owner: str
    name: str  # its tools are mounted as mcp_<name>_<tool>
    url: str
    secret: str | None  # the encrypted headers, or None for a server that needs none
    risk: str | None  # every tool's risk; None: from the server's annotations
    created_at: datetime


def check_server_name(name: str) -> str:
    if not NAME.match(name):
        raise InvalidRequest(
            "a server's name is 1 to 30 lower-case letters, digits or _, starting with a "
            f"letter; {name[:60]!r} is not"
        )
    return name


@dataclass(frozen=True, slots=True)
class SaveMcpServer:
    """Store a new server; ``Conflict`` when the owner has one of that name."""

    record: McpServerRecord


@dataclass(frozen=True, slots=True)
class RemoveMcpServer:
    """Delete one; ``NotFound`` when the owner has none of that name."""

    owner: str
    name: str


McpServerOp: TypeAlias = SaveMcpServer | RemoveMcpServer
MCP_SERVER_OPS: tuple[type, ...] = (SaveMcpServer, RemoveMcpServer)


class McpServerReads(Protocol):
    async def mcp_servers(self, owner: str) -> list[McpServerRecord]:
        """``owner``'s servers, by name."""
        ...
