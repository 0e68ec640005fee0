"""Open sessions with MCP servers: ``McpClients`` keeps one per (owner, server), reused by
every call; each lives in its own task (the SDK's transports are anyio task groups, entered
and left by one task). A session seen closed is reopened before the next call; one idle
for 30 s is probed first; a call that loses its connection half-way is repeated on a
fresh session only when it is marked repeatable."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client, MCPError
from mcp.shared.dispatcher import ProgressFnT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ostinato.errors import ToolError
from ostinato.messages import JSON
from ostinato.tools.mcp.server import (
    IDLE_PING,
    MAX_PAGES,
    PING_TIMEOUT,
    CacheKey,
    Clock,
    McpServerConfig,
    McpServerUnavailable,
)

log = logging.getLogger(__name__)


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

    async def forget(self, owner: str | None, name: str) -> None:
        """Close the session with one server, if one is open (its owner removed it)."""
        session = self._sessions.pop((owner, name), None)
        if session is not None:
            await session.close()

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
