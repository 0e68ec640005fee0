"""MCP tools as ostinato ``Tool``s: names sanitised (and prefixed), input schemas
validated before a call, results turned into what the model reads."""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types

from ostinato.bounded import off_loop
from ostinato.errors import ToolError
from ostinato.messages import JSON
from ostinato.tools.base import Tool, ToolContext
from ostinato.tools.mcp.server import McpServerConfig, McpToolCache
from ostinato.tools.mcp.sessions import McpClients
from ostinato.tools.schema import (
    ToolSourceError,
    object_schema,
    sanitize_name,
    schema_validator,
    unique_names,
)

log = logging.getLogger(__name__)
_WRAP_SECONDS = 30.0  # compiling a whole listing's schemas (each a few ms at most)


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
        bounded_check=True,
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
    tools, origins = await off_loop(
        _wrap_all, listing, config, clients, owner, seconds=_WRAP_SECONDS, what="its tools"
    )
    unique_names(origins, source=f"MCP server {config.name!r}")
    return tools


def _wrap_all(
    listing: list[types.Tool], config: McpServerConfig, clients: McpClients, owner: str | None
) -> tuple[list[Tool], list[tuple[str, str]]]:
    """Every tool of a listing (each schema compiled: work off the event loop)."""
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
    return tools, origins
