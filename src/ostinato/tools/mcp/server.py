"""One MCP server's configuration (``McpServerConfig``: how to reach it, and the SDK
client for it), the error for a server that cannot be reached, and the cache of tool
listings (``McpToolCache``, ten minutes per (owner, server))."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass
from typing import TypeAlias

import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from ostinato.errors import ToolError
from ostinato.tools.base import Risk
from ostinato.tools.mcp.pinned import AddressGuard, PinnedTransport
from ostinato.tools.schema import ToolSourceError

LISTING_TTL = 600.0
IDLE_PING = 30.0
PING_TIMEOUT = 5.0
CONNECT_TIMEOUT = 30.0
CALL_TIMEOUT = 60.0
MAX_PAGES = 100

CacheKey: TypeAlias = tuple[str | None, str]
Clock: TypeAlias = Callable[[], float]


@dataclass(frozen=True, slots=True)
class McpServerConfig:
    """One MCP server: ``command`` (stdio) or ``url`` (streamable HTTP), not both.

    ``prefix`` puts the server's name before each tool name; ``risk`` sets every tool's
    risk instead of reading the server's annotations; ``timeout`` bounds each call and
    ``connect_timeout`` the start of a session (a stdio server may install itself first).
    ``guard`` (a person's server, ``personal_mcp``): every connection goes to addresses
    of ``url``'s host that passed it (``PinnedTransport``), and no proxy from the
    environment is used; ``None`` (the operator's servers): reached as configured.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] | None = None
    prefix: bool = True
    risk: Risk | None = None
    timeout: float = CALL_TIMEOUT
    connect_timeout: float = CONNECT_TIMEOUT
    guard: AddressGuard | None = None

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ToolSourceError(
                f"MCP server {self.name!r}: give either a command (stdio) or a url (HTTP)"
            )
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ToolSourceError(f"MCP server {self.name!r}: url must be http(s)")

    def client(self, stack: AsyncExitStack) -> AbstractAsyncContextManager[Client]:
        """The SDK client for this server (response caching off: ours is the cache)."""
        if self.command is not None:
            params = StdioServerParameters(
                command=self.command,
                args=list(self.args),
                env=dict(self.env) if self.env is not None else None,
                cwd=self.cwd,
            )
            return Client(stdio_client(params, errlog=sys.stderr), cache=None)
        assert self.url is not None
        pinned = None if self.guard is None else PinnedTransport(self.url, self.guard)
        http = httpx2.AsyncClient(
            headers=dict(self.headers or {}),
            timeout=httpx2.Timeout(CONNECT_TIMEOUT, read=300.0),
            transport=pinned,
            trust_env=pinned is None,  # a proxy would dial the name and undo the pinning
        )
        stack.push_async_callback(http.aclose)
        return Client(streamable_http_client(self.url, http_client=http), cache=None)


class McpServerUnavailable(ToolError):
    """The MCP server could not be reached, or its session ended."""

    code = "mcp_unavailable"


@dataclass(slots=True)
class _Entry:
    tools: list[types.Tool]
    expires: float


class McpToolCache:
    """Tool listings per (owner, server) for ``ttl`` seconds (ten minutes)."""

    def __init__(self, ttl: float = LISTING_TTL, clock: Clock = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._entries: dict[CacheKey, _Entry] = {}

    def get(self, key: CacheKey) -> list[types.Tool] | None:
        entry = self._entries.get(key)
        if entry is None or self.clock() >= entry.expires:
            self._entries.pop(key, None)
            return None
        return entry.tools

    def put(self, key: CacheKey, tools: list[types.Tool]) -> None:
        self._entries[key] = _Entry(list(tools), self.clock() + self.ttl)

    def invalidate(self, key: CacheKey | None = None) -> None:
        if key is None:
            self._entries.clear()
        else:
            self._entries.pop(key, None)
