"""Tools from MCP servers, through the official ``mcp`` SDK (2.x).

``mcp_tools(config, cache=..., clients=...)`` lists a server's tools and wraps each as an
ostinato ``Tool``: its name sanitised (and prefixed with the server's name unless the
configuration says not to), its description, its input schema (validated with
``jsonschema`` before a call). Calling it calls the tool on the server; an ``isError``
result or a failure is a ``ToolError``; text content is joined, structured content is
returned as JSON.

- **Listings are cached** in a ``McpToolCache`` for ten minutes per (owner, server):
  ``owner`` is ``None`` for a server configured for everyone, the user's id for one
  configured per user.
- **Sessions stay open** in a ``McpClients`` manager, one per (owner, server), reused by
  every call; the server closes them with ``aclose()`` at shutdown. Each session lives in
  its own task, since the SDK's transports are anyio task groups that must be entered and
  left by one task.
- **A dead session is reopened once.** A session seen closed (the process died, the HTTP
  session ended) is reopened before the next call; a session idle for 30 s is probed
  first (``server/discover``, or ``ping`` on older protocol versions). A call that loses
  its connection half-way is repeated on a fresh session only when the server marks the
  tool read-only or idempotent: otherwise the model is told it may or may not have run.
- **Risk** comes from the server's annotations, which are hints: a read-only tool is a
  ``read`` with risk ``network``; any other is an ``action`` with risk ``write`` (so an
  approval policy asks), unless the configuration sets a risk for the server's tools.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import anyio
import httpx2
import mcp_types as types
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ostinato.errors import ToolError
from ostinato.messages import JSON
from ostinato.tools.base import Risk, Tool, ToolContext
from ostinato.tools.schema import (
    ToolSourceError,
    object_schema,
    sanitize_name,
    schema_validator,
    unique_names,
)

log = logging.getLogger(__name__)

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
        http = httpx2.AsyncClient(
            headers=dict(self.headers or {}),
            timeout=httpx2.Timeout(CONNECT_TIMEOUT, read=300.0),
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


# --- sessions ---------------------------------------------------------------------------------


class _Closed(Exception):
    """The session's connection is gone."""


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _is_connection_loss(exc: BaseException) -> bool:
    exc = _leaf(exc)
    if isinstance(exc, MCPError):
        return exc.code == types.CONNECTION_CLOSED
    return isinstance(
        exc,
        anyio.ClosedResourceError
        | anyio.BrokenResourceError
        | anyio.EndOfStream
        | httpx2.TransportError
        | OSError,
    )


async def _probe(client: Client) -> None:
    """One cheap round trip: ``server/discover`` on a 2026-07-28 session (which has no
    ``ping``), ``ping`` on an older one."""
    version = client.protocol_version
    if version in MODERN_PROTOCOL_VERSIONS:
        await client.session.send_discover(version)
    else:
        await client.session.send_ping()


def _retrieve(future: asyncio.Future[None]) -> None:
    """Mark a start-up failure seen, so an abandoned one logs no 'never retrieved'."""
    if not future.cancelled():
        future.exception()


@dataclass
class _Session:
    """One open SDK client, owned by a task that enters and leaves its context."""

    config: McpServerConfig
    clock: Clock
    client: Client | None = None
    dead: bool = False
    last_used: float = 0.0
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ready.add_done_callback(_retrieve)
        self._task = asyncio.create_task(self._run(ready), name=f"mcp:{self.config.name}")
        try:
            async with asyncio.timeout(self.config.connect_timeout):
                await asyncio.shield(ready)
        except asyncio.CancelledError:
            self._stop.set()  # the session task closes itself; nothing to wait for here
            raise
        except Exception as exc:
            await self.close()
            reason = _leaf(exc)
            raise McpServerUnavailable(
                f"could not start a session with the MCP server {self.config.name!r}: "
                f"{type(reason).__name__}: {reason}"
            ) from None
        self.last_used = self.clock()

    async def _run(self, ready: asyncio.Future[None]) -> None:
        try:
            async with AsyncExitStack() as stack:
                self.client = await stack.enter_async_context(self.config.client(stack))
                ready.set_result(None)
                await self._stop.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                log.info("MCP server %r: session ended: %r", self.config.name, exc)
        finally:
            self.dead = True
            self.client = None
            if not ready.done():
                ready.set_exception(McpServerUnavailable("the session ended before it started"))

    async def close(self) -> None:
        self.dead = True
        self._stop.set()
        if self._task is not None:
            try:
                async with asyncio.timeout(10.0):
                    await asyncio.shield(self._task)
            except TimeoutError:
                self._task.cancel()
            except Exception as exc:  # the session is going away either way
                log.debug("MCP server %r: closing: %r", self.config.name, exc)

    async def alive(self) -> bool:
        """Whether the session can still be used; pinged when idle for a while."""
        if self.dead or self.client is None:
            return False
        if self.clock() - self.last_used < IDLE_PING:
            return True
        try:
            with anyio.fail_after(PING_TIMEOUT):
                await _probe(self.client)
        except Exception:
            self.dead = True
            return False
        self.last_used = self.clock()
        return True

    async def request(self, action: Callable[[Client], Any]) -> Any:
        client = self.client
        if self.dead or client is None:
            raise _Closed
        try:
            result = await action(client)
        except Exception as exc:
            if _is_connection_loss(exc):
                self.dead = True
                raise _Closed from exc
            raise
        self.last_used = self.clock()
        return result


class McpClients:
    """Open MCP sessions, one per (owner, server), reused across calls and turns."""

    def __init__(self, *, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self._sessions: dict[CacheKey, _Session] = {}
        self._locks: dict[CacheKey, asyncio.Lock] = {}
        self.opened = 0  # sessions opened so far (reconnects included)

    async def _session(self, config: McpServerConfig, owner: str | None) -> _Session:
        key = (owner, config.name)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            session = self._sessions.get(key)
            # A changed configuration (a reload) gets a new session.
            if session is not None and session.config == config and await session.alive():
                return session
            if session is not None:
                await session.close()
            session = _Session(config, self.clock)
            await session.open()
            self._sessions[key] = session
            self.opened += 1
            return session

    async def _request(
        self,
        config: McpServerConfig,
        owner: str | None,
        action: Callable[[Client], Any],
        *,
        repeatable: bool,
    ) -> Any:
        session = await self._session(config, owner)
        try:
            return await session.request(action)
        except _Closed:
            if not repeatable:
                raise McpServerUnavailable(
                    f"the connection to the MCP server {config.name!r} closed during the call, "
                    "so it may or may not have run; the session will be reopened: call the "
                    "tool again if it should run"
                ) from None
        session = await self._session(config, owner)
        try:
            return await session.request(action)
        except _Closed:
            raise McpServerUnavailable(
                f"the MCP server {config.name!r} closed the connection again"
            ) from None

    async def list_tools(
        self, config: McpServerConfig, owner: str | None = None
    ) -> list[types.Tool]:
        """Every tool the server lists, all pages."""

        async def listing(client: Client) -> list[types.Tool]:
            tools: list[types.Tool] = []
            cursor: str | None = None
            for _ in range(MAX_PAGES):
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            return tools

        try:
            result: list[types.Tool] = await self._request(config, owner, listing, repeatable=True)
        except MCPError as exc:
            raise McpServerUnavailable(
                f"the MCP server {config.name!r} would not list its tools: {exc}"
            ) from None
        return result

    async def call_tool(
        self,
        config: McpServerConfig,
        owner: str | None,
        name: str,
        arguments: JSON,
        *,
        repeatable: bool = False,
        progress: Callable[[str], None] | None = None,
    ) -> types.CallToolResult:
        """Call a tool; ``progress`` receives the server's progress notifications as
        lines ("40/100: copying")."""
        on_progress = None if progress is None else _progress_lines(progress)

        async def call(client: Client) -> types.CallToolResult:
            return await client.call_tool(
                name,
                arguments,
                read_timeout_seconds=config.timeout,
                progress_callback=on_progress,
            )

        try:
            result: types.CallToolResult = await self._request(
                config, owner, call, repeatable=repeatable
            )
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                raise ToolError(
                    f"the MCP tool {name!r} took longer than {config.timeout:g} s"
                ) from None
            raise ToolError(f"the MCP server refused the call to {name!r}: {exc}") from None
        return result

    async def aclose(self) -> None:
        """Close every session (the server calls this at shutdown)."""
        sessions = list(self._sessions.values())
        self._sessions.clear()
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)


def _progress_lines(report: Callable[[str], None]) -> ProgressFnT:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        done = f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"
        report(f"{done}: {message}" if message else done)

    return on_progress


# --- tools ----------------------------------------------------------------------------------------


def result_value(result: types.CallToolResult, tool: str) -> Any:
    """What the model sees: structured content as JSON, else the content as text."""
    text = "\n".join(_content_text(block) for block in result.content)
    if result.is_error:
        raise ToolError(text or f"the MCP tool {tool!r} failed")
    if result.structured_content is not None:
        return result.structured_content
    return text


def _content_text(block: types.ContentBlock) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        return f"[{block.type}: {block.mime_type}, {len(block.data) * 3 // 4:,} bytes]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return resource.text
        return f"[resource {resource.uri}: {resource.mime_type or 'binary'}]"
    return f"[resource link: {block.uri}]"


def wrap_tool(
    spec: types.Tool, config: McpServerConfig, clients: McpClients, owner: str | None = None
) -> Tool:
    """One MCP tool as an ostinato ``Tool``; a bad input schema is a ``ToolSourceError``."""
    name = sanitize_name(spec.name, prefix=sanitize_name(config.name) if config.prefix else None)
    schema = object_schema(spec.input_schema)
    validate = schema_validator(schema, where=f"MCP tool {config.name}/{spec.name}")
    hints = spec.annotations
    read_only = bool(hints and hints.read_only_hint)
    repeatable = read_only or bool(hints and hints.idempotent_hint)
    remote_name = spec.name

    async def run(arguments: JSON, context: ToolContext) -> Any:
        result = await clients.call_tool(
            config,
            owner,
            remote_name,
            arguments,
            repeatable=repeatable,
            progress=context.progress,
        )
        return result_value(result, remote_name)

    return Tool(
        name=name,
        description=(spec.description or spec.title or spec.name).strip()[:2048],
        parameters=schema,
        run=run,
        validate=validate,
        category="read" if read_only else "action",
        risk=config.risk or ("network" if read_only else "write"),
        idempotent=repeatable,
        timeout=config.timeout + 5.0,
        # A remembered family grant covers every call of a read-only tool of this server.
        family=(lambda _arguments: config.name) if read_only else None,
        untrusted=True,  # what a server returns comes from outside the conversation
    )


async def mcp_tools(
    config: McpServerConfig,
    *,
    cache: McpToolCache,
    clients: McpClients,
    owner: str | None = None,
) -> list[Tool]:
    """The server's tools as ostinato tools, listed at most once per ``cache.ttl``.

    ``owner`` is the user a per-user server is configured for, ``None`` for a server
    configured for everyone. Two tools that sanitise to one name are a
    ``ToolSourceError``; a tool whose input schema is invalid is left out (logged).
    """
    key = (owner, config.name)
    listing = cache.get(key)
    if listing is None:
        listing = await clients.list_tools(config, owner)
        cache.put(key, listing)
    tools: list[Tool] = []
    origins: list[tuple[str, str]] = []
    for spec in listing:
        try:
            tool = wrap_tool(spec, config, clients, owner)
        except ToolSourceError as exc:
            log.warning("MCP server %r: tool %r left out: %s", config.name, spec.name, exc)
            continue
        tools.append(tool)
        origins.append((tool.name, f"tool {spec.name!r}"))
    unique_names(origins, source=f"MCP server {config.name!r}")
    return tools
