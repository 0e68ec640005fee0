"""The tools a model uses to forge tools for its person, and the source that mounts them.

- ``create_tool`` (risk ``exec``: a person approves it, and the approval card carries the
  code): checks and tries the tool once in the sandbox, stores it as a new version;
- ``remove_tool`` (risk ``write``): marks it removed, its versions kept;
- ``forged_tools``: the person's tools, or one tool's versions with their code.

``forged_source`` lists an owner's tools as ``my_<name>`` each time a turn begins, so a
tool made in one turn is callable from the next; a running turn keeps the versions it
began with, and a conversation the versions it started with (``versions``: an edit made
elsewhere reaches new conversations, one made in the conversation itself its next turn).
Forged tools belong to a person: a conversation without an owner has none and cannot
make one.
"""

from __future__ import annotations

from typing import Any

from ostinato.errors import ClientError, ToolError
from ostinato.store.base import Store
from ostinato.store.forged import ForgedTool
from ostinato.tools.base import Tool, ToolContext
from ostinato.tools.forge.forging import as_tool, forge, remove
from ostinato.tools.forge.limits import CODE_LIMIT
from ostinato.tools.forge.pool import Sandbox
from ostinato.tools.forge.versions import conversation_versions
from ostinato.tools.functions import function_tool
from ostinato.tools.mounting import Source

FORGE_TOOLS = ("create_tool", "remove_tool", "forged_tools")


def _owner(context: ToolContext) -> str:
    if not context.owner:
        raise ToolError("tools you make belong to a person; this conversation has no owner")
    return context.owner


def _summary(tool: ForgedTool) -> dict[str, Any]:
    return {"name": tool.tool_name, "version": tool.version, "description": tool.description}


def forge_tools(store: Store, sandbox: Sandbox) -> list[Tool]:
    """``create_tool``, ``remove_tool`` and ``forged_tools`` over ``store``."""
    assert CODE_LIMIT == 4_096  # create_tool's docstring says so
    return [_create_tool(store, sandbox), _remove_tool(store), _list_tool(store)]


def _create_tool(store: Store, sandbox: Sandbox) -> Tool:
    async def create_tool(
        name: str,
        description: str,
        parameters: dict[str, Any],
        code: str,
        context: ToolContext,
        example: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Make a new tool for the user (or a new version of one), written as one
        JavaScript function of its arguments object, e.g.
        `(args) => ({fahrenheit: args.celsius * 9 / 5 + 32})`. It may be async and use
        `await fetch(url)` (GET or HEAD of public web addresses; the response has status,
        ok, text and json()); nothing else of the outside world is there (no files,
        processes, modules, timers). It is tried once with the example, stored, and can
        be called as my_<name> from the next turn. The user approves it first.

        Args:
            name: Lower-case letters, digits and _ (the tool is called my_<name>).
            description: What the tool does, for whoever calls it.
            parameters: The JSON schema of its arguments object ({"type": "object", ...}).
            code: One JavaScript function expression, at most 4,096 bytes.
            example: Arguments to try it with (they must match parameters).
        """
        try:
            forged = await forge(
                store,
                sandbox,
                _owner(context),
                name=name,
                description=description,
                parameters=parameters,
                code=code,
                example=example,
                conversation_id=context.conversation_id,
            )
        except ClientError as exc:
            raise ToolError(exc.message) from None
        return {
            "created": forged.tool.tool_name,
            "version": forged.tool.version,
            "tried": {"arguments": forged.example, "result": forged.result},
            "note": "it can be called from the next turn on",
        }

    return function_tool(create_tool, category="action", risk="exec", idempotent=False)


def _remove_tool(store: Store) -> Tool:
    async def remove_tool(name: str, context: ToolContext) -> dict[str, Any]:
        """Remove one of the user's tools (its versions are kept as history).

        Args:
            name: The tool's name, with or without my_.
        """
        try:
            removed = await remove(store, _owner(context), name)
        except ClientError as exc:
            raise ToolError(exc.message) from None
        return {"removed": removed.tool_name, "version": removed.version}

    return function_tool(remove_tool, category="action", risk="write", idempotent=False)


def _list_tool(store: Store) -> Tool:
    async def forged_tools(context: ToolContext, name: str | None = None) -> dict[str, Any]:
        """The tools the user has made; with name, every version of that one with its
        code.

        Args:
            name: One tool's name, for its versions.
        """
        owner = _owner(context)
        if name is None:
            return {"tools": [_summary(t) for t in await store.forged_tools(owner)]}
        versions = await store.forged_tool_versions(owner, name.removeprefix("my_"))
        if not versions:
            raise ToolError(f"no tool named {name!r}")
        return {
            "versions": [
                {**_summary(v), "code": v.code, "removed": v.removed_at is not None}
                for v in versions
            ]
        }

    return function_tool(forged_tools, category="read", risk="safe")


def forged_source(store: Store, sandbox: Sandbox) -> Source:
    """The owner's forged tools, listed from the store when each turn begins: in a
    conversation, the versions it started with; outside one, the newest."""

    async def lister(owner: str | None) -> list[Tool]:
        if not owner:
            return []
        return [as_tool(t, sandbox) for t in await store.forged_tools(owner)]

    async def in_conversation(owner: str | None, conversation_id: str | None) -> list[Tool]:
        if not owner or conversation_id is None:
            return await lister(owner)
        versions = await conversation_versions(store, owner, conversation_id)
        return [as_tool(t, sandbox) for t in versions]

    return Source("forged", lister=lister, conversation_lister=in_conversation)
