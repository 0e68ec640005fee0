"""Mounting tools from several sources into one registry, in a fixed order.

Sources mount in order: built-ins, Python-function tools, OpenAPI operations, MCP
servers. Names are sanitised by each source. A built-in wins a collision with any other
source (a later source's tool with a taken name is left out and reported, so a server
cannot shadow a built-in); two tools of one name within one source are a configuration
error (``ValueError``) raised when that source is mounted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from ostinato.tools.base import Tool
from ostinato.tools.registry import ToolRegistry

ToolLister = Callable[[str | None], Awaitable[list[Tool]]]
"""Lists a dynamic source's tools for an owner (``None``: no owner), e.g. an MCP server."""


@dataclass(frozen=True, slots=True)
class Source:
    name: str
    tools: Sequence[Tool] = ()
    lister: ToolLister | None = None  # dynamic tools, listed at the start of each turn
    builtin: bool = False


@dataclass(slots=True)
class Mounted:
    registry: ToolRegistry
    shadowed: list[str] = field(default_factory=list)  # "source:tool" left out by a collision
    failed: list[str] = field(default_factory=list)  # sources that could not be listed


class Mount:
    """The ordered tool sources of a deployment."""

    def __init__(self, sources: Sequence[Source]) -> None:
        self.sources = sorted(sources, key=lambda s: not s.builtin)  # built-ins first, stable
        for source in self.sources:
            _unique(source.name, source.tools)
        self._static: Mounted | None = None  # with no dynamic source, one registry serves

    async def registry(self, owner: str | None = None) -> Mounted:
        if any(source.lister is not None for source in self.sources):
            return await self._mount(owner)
        if self._static is None:
            self._static = await self._mount(None)
        return self._static

    async def _mount(self, owner: str | None) -> Mounted:
        registry = ToolRegistry()
        mounted = Mounted(registry)
        for source in self.sources:
            tools = list(source.tools)
            if source.lister is not None:
                try:
                    listed = await source.lister(owner)
                except Exception as exc:  # a server that is down must not stop the turn
                    mounted.failed.append(f"{source.name}: {exc}")
                    listed = []
                _unique(source.name, listed)
                tools += listed
            for tool in tools:
                if tool.name in registry:
                    mounted.shadowed.append(f"{source.name}:{tool.name}")
                else:
                    registry.add(tool)
        return mounted


def _unique(source: str, tools: Sequence[Tool]) -> None:
    names = [t.name for t in tools]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"tool source {source!r} has two tools named {', '.join(repeated)}")
