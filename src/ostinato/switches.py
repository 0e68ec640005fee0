"""Tool switches: which tools a person (or one conversation) switched off, kept per scope.

A scope is an owner, or ``conversation:<id>`` for a conversation without one. The store
holds the switches; this process keeps what it read and updates it on its own writes.
With several server processes a write also sends ``switches`` to the others through the
bus's relay, and each forgets what it kept for that scope (everything, on ``resync``),
so its next read comes from the store.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ostinato.bus import LocalBus
from ostinato.errors import Conflict, NotFound
from ostinato.store.base import SetToolSwitch, Store
from ostinato.tools.mounting import Mount


@dataclass(frozen=True, slots=True)
class ToolSwitchState:
    name: str
    enabled: bool
    protected: bool
    deployment_off: bool  # switched off for everyone by the deployment's configuration
    category: str
    risk: str


class ToolSwitches:
    """The switches of every scope, read once per scope and kept."""

    def __init__(
        self,
        store: Store,
        mount: Mount,
        *,
        disabled: frozenset[str],
        protected: frozenset[str],
        bus: LocalBus | None = None,
    ) -> None:
        self.store = store
        self.bus = bus
        if bus is not None:
            bus.on("switches", self._forget)
            bus.on("resync", self._forget)
        self.mount = mount
        self.disabled = disabled
        self.protected = protected
        self._off: dict[str, frozenset[str]] = {}

    async def switched_off(self, scope: str) -> frozenset[str]:
        """The tools ``scope`` switched off."""
        found = self._off.get(scope)
        if found is None:
            found = self._off[scope] = await self.store.switched_off_tools(scope)
        return found

    async def states(self, scope: str) -> list[ToolSwitchState]:
        """Every tool the scope's turns could be offered, and whether it is on."""
        off = await self.switched_off(scope)
        owner = None if scope.startswith("conversation:") else scope
        registry = (await self.mount.registry(owner)).registry
        return [
            ToolSwitchState(
                tool.name,
                tool.name not in off and tool.name not in self.disabled,
                tool.name in self.protected,
                tool.name in self.disabled,
                tool.category,
                tool.risk,
            )
            for tool in registry
        ]

    async def switch(self, scope: str, tool: str, *, enabled: bool) -> ToolSwitchState:
        """Switch a tool off or back on for a scope. ``Conflict`` for a protected tool,
        ``NotFound`` for a tool that does not exist."""
        state = {s.name: s for s in await self.states(scope)}.get(tool)
        if state is None:
            raise NotFound(f"no tool named {tool!r}")
        if state.protected and not enabled:
            raise Conflict(f"the tool {tool!r} is protected and cannot be switched off")
        await self.store.write(SetToolSwitch(scope, tool, enabled))
        off = set(await self.switched_off(scope))
        (off.discard if enabled else off.add)(tool)
        self._off[scope] = frozenset(off)
        if self.bus is not None:
            self.bus.command("switches", "", {"scope": scope})
        return dataclasses.replace(state, enabled=enabled and not state.deployment_off)

    async def _forget(self, _conversation_id: str, data: dict[str, object]) -> None:
        """Another server switched a tool for ``data['scope']`` (all scopes: none given)."""
        scope = data.get("scope")
        if isinstance(scope, str):
            self._off.pop(scope, None)
        else:
            self._off.clear()
