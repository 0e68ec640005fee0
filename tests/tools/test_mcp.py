"""MCP tools against a real MCP server process (tests/tools/fixtures/mcp_server.py), over
stdio and over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import psutil
import pytest

from ostinato.errors import ToolArgumentsInvalid, ToolError
from ostinato.tools.base import Tool, ToolContext
from ostinato.tools.mcp import (
    IDLE_PING,
    LISTING_TTL,
    McpClients,
    McpServerConfig,
    McpServerUnavailable,
    McpToolCache,
    mcp_tools,
    result_value,
)
from ostinato.tools.schema import ToolSourceError

SERVER = Path(__file__).parent / "fixtures" / "mcp_server.py"
CONTEXT = ToolContext("c", "t", "r", "u")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def counts(tmp_path: Path) -> Path:
    return tmp_path / "counts.txt"


def listings(counts: Path) -> int:
    return counts.read_text().count("list\n") if counts.exists() else 0


@pytest.fixture
def stdio(counts: Path) -> McpServerConfig:
    return McpServerConfig(
        name="fixture",
        command=sys.executable,
        args=(str(SERVER),),
        env={"MCP_FIXTURE_COUNTS": str(counts)},
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def clients(clock: FakeClock) -> AsyncIterator[McpClients]:
    manager = McpClients(clock=clock)
    yield manager
    await manager.aclose()


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {t.name: t for t in tools}


async def call(tool: Tool, arguments: dict[str, Any]) -> Any:
    return await tool.run(tool.validate(arguments), CONTEXT)


# --- listing and calling over stdio --------------------------------------------------------


async def test_the_servers_tools_become_prefixed_tools(
    stdio: McpServerConfig, clients: McpClients, clock: FakeClock
) -> None:
    tools = by_name(await mcp_tools(stdio, cache=McpToolCache(clock=clock), clients=clients))
    assert set(tools) == {
        "fixture_where",
        "fixture_add",
        "fixture_echo_upper",
        "fixture_weather",
        "fixture_fail",
        "fixture_pid",
        "fixture_crash",
        "fixture_header",
        "fixture_steps",
    }
    add = tools["fixture_add"]
    assert add.description == "Add two integers."
    assert add.parameters["required"] == ["a", "b"]
    assert (add.category, add.risk, add.idempotent) == ("action", "write", False)
    pid = tools["fixture_pid"]  # annotated read-only by the server
    assert (pid.category, pid.risk, pid.idempotent) == ("read", "network", True)
    assert pid.family is not None and pid.family({}) == "fixture"  # every call of it
    assert add.family is None  # a tool that is not read-only is remembered exact only
    assert all(t.untrusted for t in tools.values())


async def test_names_without_the_prefix_and_a_configured_risk(
    stdio: McpServerConfig, clients: McpClients
) -> None:
    config = McpServerConfig(
        name="fixture", command=stdio.command, args=stdio.args, prefix=False, risk="safe"
    )
    tools = by_name(await mcp_tools(config, cache=McpToolCache(), clients=clients))
    assert "echo_upper" in tools
    assert {t.risk for t in tools.values()} == {"safe"}


async def test_calls_reach_the_server(stdio: McpServerConfig, clients: McpClients) -> None:
    tools = by_name(await mcp_tools(stdio, cache=McpToolCache(), clients=clients))
    assert await call(tools["fixture_add"], {"a": 2, "b": 3}) == {"result": 5}
    assert await call(tools["fixture_echo_upper"], {"text": "hi"}) == {"result": "HI"}
    assert await call(tools["fixture_weather"], {"city": "Oslo"}) == {
        "city": "Oslo",
        "celsius": 21.5,
    }
    assert clients.opened == 1  # one session for the listing and every call


async def test_progress_notifications_reach_the_tool_context(
    stdio: McpServerConfig, clients: McpClients
) -> None:
    tools = by_name(await mcp_tools(stdio, cache=McpToolCache(), clients=clients))
    lines: list[str] = []
    context = ToolContext("c", "t", "r", "u", progress=lines.append)
    steps = tools["fixture_steps"]
    assert await steps.run(steps.validate({"count": 3}), context) == {"result": "done"}
    assert lines == ["1/3: step 1", "2/3: step 2", "3/3: step 3"]


async def test_an_error_result_is_a_tool_error(stdio: McpServerConfig, clients: McpClients) -> None:
    tools = by_name(await mcp_tools(stdio, cache=McpToolCache(), clients=clients))
    with pytest.raises(ToolError, match="failed on purpose: because"):
        await call(tools["fixture_fail"], {"reason": "because"})


async def test_arguments_are_validated_before_the_call(
    stdio: McpServerConfig, clients: McpClients
) -> None:
    tools = by_name(await mcp_tools(stdio, cache=McpToolCache(), clients=clients))
    with pytest.raises(ToolArgumentsInvalid, match="a: 'x' is not of type 'integer'"):
        tools["fixture_add"].validate({"a": "x", "b": 1})


# --- the listing cache ---------------------------------------------------------------------


async def test_listings_are_cached_for_ten_minutes(
    stdio: McpServerConfig, clients: McpClients, clock: FakeClock, counts: Path
) -> None:
    cache = McpToolCache(clock=clock)
    await mcp_tools(stdio, cache=cache, clients=clients)
    assert listings(counts) == 1
    clock.advance(LISTING_TTL - 1)
    again = await mcp_tools(stdio, cache=cache, clients=clients)
    assert listings(counts) == 1
    assert len(again) == 9
    clock.advance(2)
    await mcp_tools(stdio, cache=cache, clients=clients)
    assert listings(counts) == 2
    assert clients.opened == 1  # the idle session was probed, found alive and reused


async def test_listings_are_cached_per_owner(
    stdio: McpServerConfig, clients: McpClients, clock: FakeClock, counts: Path
) -> None:
    cache = McpToolCache(clock=clock)
    await mcp_tools(stdio, cache=cache, clients=clients, owner="ann")
    await mcp_tools(stdio, cache=cache, clients=clients, owner="ann")
    await mcp_tools(stdio, cache=cache, clients=clients, owner="bob")
    await mcp_tools(stdio, cache=cache, clients=clients)
    assert listings(counts) == 3
    assert clients.opened == 3  # and a session per owner


async def test_a_changed_configuration_gets_a_new_session(
    stdio: McpServerConfig, clients: McpClients
) -> None:
    tools = by_name(await mcp_tools(stdio, cache=McpToolCache(), clients=clients))
    await call(tools["fixture_add"], {"a": 1, "b": 1})
    changed = McpServerConfig(
        name=stdio.name, command=stdio.command, args=stdio.args, env={"CHANGED": "1"}
    )
    tools = by_name(await mcp_tools(changed, cache=McpToolCache(), clients=clients))
    await call(tools["fixture_add"], {"a": 1, "b": 1})
    assert clients.opened == 2


def test_the_cache_expires_and_invalidates() -> None:
    clock = FakeClock()
    cache = McpToolCache(clock=clock)
    spec = types.Tool(name="t", input_schema={"type": "object"})
    cache.put((None, "s"), [spec])
    assert cache.get((None, "s")) == [spec]
    assert cache.get(("ann", "s")) is None
    cache.invalidate((None, "s"))
    assert cache.get((None, "s")) is None
    cache.put((None, "s"), [spec])
    clock.advance(LISTING_TTL)
    assert cache.get((None, "s")) is None


# --- sessions that die ----------------------------------------------------------------------


async def test_a_call_that_kills_the_server_fails_and_the_next_one_reconnects(
    stdio: McpServerConfig, clients: McpClients
) -> None:
    tools = by_name(await mcp_tools(stdio, cache=McpToolCache(), clients=clients))
    first = await call(tools["fixture_pid"], {})
    with pytest.raises(McpServerUnavailable, match="may or may not have run"):
        await call(tools["fixture_crash"], {})
    assert await call(tools["fixture_add"], {"a": 1, "b": 1}) == {"result": 2}
    second = await call(tools["fixture_pid"], {})
    assert second != first
    assert clients.opened == 2


async def test_a_read_only_call_is_repeated_once_on_a_fresh_session(
    stdio: McpServerConfig, clients: McpClients
) -> None:
    tools = by_name(await mcp_tools(stdio, cache=McpToolCache(), clients=clients))
    first = (await call(tools["fixture_pid"], {}))["result"]
    os.kill(first, signal.SIGKILL)
    second = (await call(tools["fixture_pid"], {}))["result"]
    assert second != first
    assert clients.opened == 2


async def test_an_idle_session_is_pinged_and_reopened_when_its_server_died(
    stdio: McpServerConfig, clients: McpClients, clock: FakeClock
) -> None:
    tools = by_name(await mcp_tools(stdio, cache=McpToolCache(clock=clock), clients=clients))
    first = (await call(tools["fixture_pid"], {}))["result"]
    os.kill(first, signal.SIGKILL)
    clock.advance(IDLE_PING + 1)
    # add is not repeatable: it runs at all only because the ping found the dead session.
    assert await call(tools["fixture_add"], {"a": 4, "b": 5}) == {"result": 9}
    assert clients.opened == 2


async def test_aclose_ends_the_server_processes(stdio: McpServerConfig) -> None:
    clients = McpClients()
    tools = by_name(await mcp_tools(stdio, cache=McpToolCache(), clients=clients))
    pid = (await call(tools["fixture_pid"], {}))["result"]
    await clients.aclose()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


async def test_a_server_that_cannot_start_is_unavailable(clients: McpClients) -> None:
    config = McpServerConfig(name="broken", command=sys.executable, args=("-c", "pass"))
    with pytest.raises(McpServerUnavailable, match="could not start a session"):
        await mcp_tools(config, cache=McpToolCache(), clients=clients)


# --- configuration and results ----------------------------------------------------------------


def test_a_server_is_a_command_or_a_url() -> None:
    with pytest.raises(ToolSourceError, match="either a command"):
        McpServerConfig(name="x")
    with pytest.raises(ToolSourceError, match="either a command"):
        McpServerConfig(name="x", command="srv", url="http://127.0.0.1:1/mcp")
    with pytest.raises(ToolSourceError, match="must be http"):
        McpServerConfig(name="x", url="ws://127.0.0.1:1/mcp")


async def test_names_that_collide_after_sanitising_are_a_configuration_error(
    clients: McpClients,
) -> None:
    config = McpServerConfig(name="dup", command="unused")
    cache = McpToolCache()
    schema = {"type": "object", "properties": {}}
    cache.put(
        (None, "dup"),
        [
            types.Tool(name="echo.upper", input_schema=schema),
            types.Tool(name="echo upper", input_schema=schema),
        ],
    )
    with pytest.raises(ToolSourceError, match="both become the tool 'dup_echo_upper'"):
        await mcp_tools(config, cache=cache, clients=clients)


async def test_a_tool_with_an_invalid_schema_is_left_out(clients: McpClients) -> None:
    config = McpServerConfig(name="odd", command="unused")
    cache = McpToolCache()
    cache.put(
        (None, "odd"),
        [
            types.Tool(name="good", input_schema={"type": "object"}),
            types.Tool(name="bad", input_schema={"type": "object", "properties": 5}),
        ],
    )
    assert [t.name for t in await mcp_tools(config, cache=cache, clients=clients)] == ["odd_good"]


def test_result_content_is_shown_as_text() -> None:
    result = types.CallToolResult(
        content=[
            types.TextContent(text="line one"),
            types.ImageContent(data="aGVsbG8h", mime_type="image/png"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(uri="file:///a.txt", text="inside")
            ),
        ]
    )
    assert result_value(result, "t") == "line one\n[image: image/png, 6 bytes]\ninside"
    with pytest.raises(ToolError, match="the MCP tool 't' failed"):
        result_value(types.CallToolResult(content=[], is_error=True), "t")


# --- streamable HTTP ----------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    for _ in range(1000):  # up to ~10 s for the server to listen
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            assert process.poll() is None, "the MCP HTTP server exited"
            time.sleep(0.01)
    raise AssertionError("the MCP HTTP server did not listen")


@pytest.fixture
def http_server(counts: Path) -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        env={**os.environ, "MCP_FIXTURE_COUNTS": str(counts)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_listening(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_streamable_http_lists_and_calls(
    http_server: str, clients: McpClients, counts: Path
) -> None:
    config = McpServerConfig(name="remote", url=http_server, headers={"X-Team": "blue"})
    cache = McpToolCache()
    tools = by_name(await mcp_tools(config, cache=cache, clients=clients))
    assert "remote_add" in tools
    assert await call(tools["remote_add"], {"a": 20, "b": 22}) == {"result": 42}
    assert await call(tools["remote_header"], {"name": "x-team"}) == {"result": "blue"}
    with pytest.raises(ToolError, match="failed on purpose"):
        await call(tools["remote_fail"], {"reason": "http"})
    await mcp_tools(config, cache=cache, clients=clients)
    assert listings(counts) == 1


async def test_streamable_http_survives_a_server_restart(
    counts: Path, clients: McpClients, clock: FakeClock
) -> None:
    port = _free_port()

    def start() -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            [sys.executable, str(SERVER), "http", str(port)],
            env={**os.environ, "MCP_FIXTURE_COUNTS": str(counts)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_listening(port, process)
        return process

    process = start()
    try:
        config = McpServerConfig(name="remote", url=f"http://127.0.0.1:{port}/mcp")
        tools = by_name(await mcp_tools(config, cache=McpToolCache(clock=clock), clients=clients))
        first = (await call(tools["remote_pid"], {}))["result"]
        process.terminate()
        process.wait(timeout=10)
        process = start()
        clock.advance(IDLE_PING + 1)
        assert await call(tools["remote_add"], {"a": 1, "b": 2}) == {"result": 3}
        assert (await call(tools["remote_pid"], {}))["result"] != first
        # A 2026-07-28 server keeps no HTTP session to lose: the same client goes on.
        assert clients.opened == 1
    finally:
        process.terminate()
        process.wait(timeout=10)
