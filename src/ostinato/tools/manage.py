"""``manage_tools``: the model lists the tools of its conversation with their state, and
switches one off or back on, for the conversation's owner (or, for a conversation
without one, for that conversation), exactly as ``PUT /v1/tools/{name}`` would.

It is protected (``PROTECTED``): it can never be switched off, so a model (or a person)
cannot lose the way back. Listing changes nothing and runs without asking; switching
(risk ``write``) asks the person first under the default approval policy. A protected
tool refuses to be switched off; a tool the deployment switched off stays off.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, Protocol

from ostinato.errors import ClientError, ToolError
from ostinato.memory.facts import scope_for
from ostinato.messages import JSON
from ostinato.tools.base import Tool, ToolContext
from ostinato.tools.functions import function_tool

PROTECTED = frozenset({"manage_tools", "manage_messages"})
"""Tools no one can switch off, whatever the configuration says."""


class SwitchState(Protocol):
    name: str
    enabled: bool
    protected: bool
    deployment_off: bool


class Switches(Protocol):
    """What the runtime offers (``Runtime.tool_switches`` / ``switch_tool``)."""

    async def tool_switches(self, scope: str) -> list[Any]: ...

    async def switch_tool(self, scope: str, tool: str, *, enabled: bool) -> Any: ...


def _switches(context: ToolContext) -> Switches:
    runtime = context.extras.get("runtime")
    if runtime is None or not hasattr(runtime, "switch_tool"):
        raise ToolError("managing tools needs the runtime; it is not available here")
    found: Switches = runtime
    return found


def _state(state: SwitchState) -> dict[str, Any]:
    out: dict[str, Any] = {"name": state.name, "on": state.enabled}
    if state.protected:
        out["protected"] = True
    if state.deployment_off:
        out["off_for_everyone"] = True
    return out


def _changes(arguments: JSON) -> bool:
    return bool(arguments.get("action", "list") != "list")


def manage_tools_tool() -> Tool:
    async def manage_tools(
        context: ToolContext,
        action: Literal["list", "off", "on"] = "list",
        name: str | None = None,
    ) -> dict[str, Any]:
        """List the tools of this conversation with whether each is on, or switch one
        off or back on for the user (from the next turn on). Protected tools cannot be
        switched off; switching asks the user first.

        Args:
            action: list, off or on.
            name: The tool to switch (for off and on).
        """
        switches = _switches(context)
        scope = scope_for(context.owner, context.conversation_id)
        if action == "list":
            return {"tools": [_state(s) for s in await switches.tool_switches(scope)]}
        if not name:
            raise ToolError(f"name the tool to switch {action}")
        try:
            state = await switches.switch_tool(scope, name, enabled=action == "on")
        except ClientError as exc:
            raise ToolError(exc.message) from None
        return {"tool": _state(state), "note": "from the next turn on"}

    tool = function_tool(manage_tools, category="action", risk="write", idempotent=True)
    return dataclasses.replace(tool, changes=_changes)
