"""The tool sources a configuration names, built the one way for ``serve`` and for
``check-config``, so a source that ``check-config`` passes is one that ``serve`` mounts.

- ``tool_sources`` builds them in mount order: the built-ins (``http_fetch`` with the
  deployment's allow-list, memory, sub-agents), each OpenAPI document (loaded now; one
  that does not load is mounted as a failed source, which the banner and
  ``GET /v1/tools/sources`` show), each MCP server (listed at each turn).
- ``check_sources`` finds what only opening them shows: a document that does not load
  or is refused, an auth secret that is not set, an MCP command that is not a program,
  a server that does not start or list its tools, and tool names (an agent's
  allow-list, ``tools.disabled``, ``tools.protected``) that no source has.

The MCP SDK, the OpenAPI reader and YAML are imported only when the configuration names
such a source.
"""

from __future__ import annotations

import difflib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ostinato.background.schedules import Schedules
from ostinato.background.tool import schedule_tool
from ostinato.config import Config, ConfigError, McpSource, OpenApiSource
from ostinato.config.checks import Places
from ostinato.memory.facts import Memory
from ostinato.memory.tools import memory_tools
from ostinato.subagents import subagent_tools
from ostinato.tools.base import Tool
from ostinato.tools.builtins import default_registry
from ostinato.tools.fetch import http_fetch_tool
from ostinato.tools.forge.pool import Sandbox
from ostinato.tools.forge.tools import forge_tools, forged_source
from ostinato.tools.manage import manage_tools_tool
from ostinato.tools.messages_tool import manage_messages_tool
from ostinato.tools.mounting import Source, ToolLister

if TYPE_CHECKING:
    from ostinato.tools.mcp import McpClients
    from ostinato.tools.openapi import Auth


def builtin_tools(config: Config, memory: Memory) -> list[Tool]:
    return [
        *default_registry(),
        http_fetch_tool(allow_hosts=config.tools.fetch_allow_hosts),
        *memory_tools(memory.store, memory.ranker, capacity=memory.capacity),
        *subagent_tools(),
        manage_tools_tool(),
        schedule_tool(Schedules(memory.store, config.background)),
        manage_messages_tool(),
    ]


async def tool_sources(
    config: Config,
    memory: Memory,
    clients: McpClients | None,
    env: Mapping[str, str],
    sandbox: Sandbox | None = None,
) -> list[Source]:
    """The sources, in mount order. ``ConfigError`` for an OpenAPI auth that names no
    secret or a secret that is not set; ``clients`` holds the MCP sessions (``None``
    when no MCP server is configured)."""
    sources = [Source("builtins", builtin_tools(config, memory), builtin=True)]
    if sandbox is not None:  # forged tools: the tools to make them, then each owner's
        sources[0] = Source(
            "builtins", [*sources[0].tools, *forge_tools(memory.store, sandbox)], builtin=True
        )
        sources.append(forged_source(memory.store, sandbox))
    for openapi in config.tools.openapi:
        sources.append(await openapi_source(openapi, env))
    if config.tools.mcp:
        assert clients is not None
        sources += [
            Source(f"mcp:{s.name}", lister=mcp_lister(s, clients)) for s in config.tools.mcp
        ]
    return sources


async def openapi_source(source: OpenApiSource, env: Mapping[str, str]) -> Source:
    """The document's operations as a source; a document that does not load (or that
    ``openapi_tools`` refuses) is a source that failed, with the reason."""
    from ostinato.tools.openapi import load_openapi, openapi_tools
    from ostinato.tools.schema import ToolSourceError

    name = f"openapi:{source.name}"
    auth = _auth(source.name, source.auth, env)
    try:
        document = await load_openapi(source.url)
        tools = openapi_tools(
            document, base_url=source.base_url, auth=auth, prefix=source.prefix or source.name
        )
    except (ToolSourceError, OSError) as exc:
        return Source(name, error=f"cannot load {source.url}: {exc}")
    except Exception as exc:  # an HTTP failure fetching it, a malformed document
        return Source(name, error=f"cannot load {source.url}: {type(exc).__name__}: {exc}")
    return Source(name, tools)


def _auth(name: str, spec: Mapping[str, str] | None, env: Mapping[str, str]) -> Auth | None:
    """``{type = "bearer", token_env}``, ``{type = "api_key", name, value_env, location}``
    or ``{type = "basic", username, password_env}``; secrets come from the environment."""
    from ostinato.tools.openapi import ApiKeyAuth, BasicAuth, BearerAuth

    if not spec:
        return None
    where = f"tools.openapi {name!r}.auth"

    def secret(key: str) -> str:
        variable = spec.get(key)
        if not variable:
            raise ConfigError(where, [f"{key} is required (the variable holding the secret)"])
        value = env.get(variable)
        if value is None:
            raise ConfigError(where, [f"the environment variable {variable} is not set"])
        return value

    kind = spec.get("type")
    if kind == "bearer":
        return BearerAuth(secret("token_env"))
    if kind == "api_key":
        location = spec.get("location", "header")
        if location not in ("header", "query"):
            raise ConfigError(where, ["location must be 'header' or 'query'"])
        return ApiKeyAuth(spec.get("name", "X-API-Key"), secret("value_env"), location)  # type: ignore[arg-type]
    if kind == "basic":
        return BasicAuth(spec.get("username", ""), secret("password_env"))
    raise ConfigError(where, [f"type must be bearer, api_key or basic, not {kind!r}"])


def mcp_lister(source: McpSource, clients: McpClients) -> ToolLister:
    from ostinato.tools.mcp import McpServerConfig, McpToolCache, mcp_tools

    config = McpServerConfig(
        name=source.name,
        command=source.command,
        args=tuple(source.args),
        env=dict(source.env) or None,
        cwd=source.cwd,
        url=source.url,
        headers=dict(source.headers) or None,
        risk=source.risk,
        timeout=source.timeout,
    )
    cache = McpToolCache()

    async def lister(owner: str | None) -> list[Tool]:
        return await mcp_tools(
            config, cache=cache, clients=clients, owner=owner if source.per_user else None
        )

    return lister


def mcp_clients(config: Config) -> McpClients | None:
    """A session manager when MCP servers are configured (the SDK is imported then)."""
    if not config.tools.mcp:
        return None
    from ostinato.tools.mcp import McpClients

    return McpClients()


# --- checking --------------------------------------------------------------------------------


def program_problem(source: McpSource) -> str | None:
    """Why a stdio server's command cannot start, if it cannot: not on ``PATH`` (or, for
    a path, not an executable file), or a working directory that does not exist."""
    if source.cwd is not None and not Path(source.cwd).expanduser().is_dir():
        return f"cwd: {source.cwd!r} is not a directory"
    if source.command is None:
        return None
    command = source.command
    if os.sep in command:
        path = Path(source.cwd or ".").expanduser() / Path(command).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            return f"command: {command!r} is not an executable file"
        return None
    if shutil.which(command, path=(source.env or {}).get("PATH") or os.environ.get("PATH")):
        return None
    return f"command: {command!r} is not a program on PATH"


async def check_sources(
    config: Config, raw: dict[str, Any], env: Mapping[str, str], *, start_servers: bool
) -> list[str]:
    """Every problem opening the sources shows, as ``where: what`` lines."""
    from ostinato.store.memory import MemoryStore

    places = Places(raw)
    problems: list[str] = []
    names = {t.name for t in builtin_tools(config, Memory(MemoryStore()))}
    for openapi in config.tools.openapi:
        try:
            source = await openapi_source(openapi, env)
        except ConfigError as exc:
            problems += [f"{places.openapi(openapi.name)}.auth: {p}" for p in exc.problems]
            continue
        if source.error is not None:
            problems.append(f"{places.openapi(openapi.name)}: {source.error}")
        names |= {t.name for t in source.tools}
    listed, unlisted, mcp_problems = await _list_mcp(config, places, start_servers)
    return problems + mcp_problems + unknown_tools(config, places, names | listed, unlisted)


async def _list_mcp(
    config: Config, places: Places, start_servers: bool
) -> tuple[set[str], list[str], list[str]]:
    """The MCP servers' tool names, the servers not listed, and the problems found."""
    names: set[str] = set()
    unlisted: list[str] = []
    problems: list[str] = []
    clients = mcp_clients(config)
    try:
        for mcp in config.tools.mcp:
            problem = program_problem(mcp)
            if problem is not None:
                problems.append(f"{places.mcp(mcp.name)}.{problem}")
            if problem is not None or not start_servers or clients is None:
                unlisted.append(mcp.name)
                continue
            try:
                names |= {t.name for t in await mcp_lister(mcp, clients)(None)}
            except Exception as exc:
                problems.append(f"{places.mcp(mcp.name)}: cannot list its tools: {exc}")
                unlisted.append(mcp.name)
    finally:
        if clients is not None:
            await clients.aclose()
    return names, unlisted, problems


def unknown_tools(
    config: Config, places: Places, names: set[str], unlisted: list[str]
) -> list[str]:
    """Tool names the configuration uses that no source has."""
    uses: list[tuple[str, list[str]]] = [
        *((f"{places.agent(a.id)}.tools", a.tools or []) for a in config.agents),
        ("tools.disabled", config.tools.disabled),
        ("tools.protected", config.tools.protected),
    ]
    maybe = (
        f"; it may be a tool of {', '.join(repr(n) for n in unlisted)}, which could not be listed"
        if unlisted
        else ""
    )
    problems = []
    for where, used in uses:
        for name in used:
            if name in names:
                continue
            close = difflib.get_close_matches(name, sorted(names), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"{where}: no tool is named {name!r}{hint}{maybe}")
    return problems
