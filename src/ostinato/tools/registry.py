"""The tools a process knows (``ToolRegistry``) and the tools one turn offers
(``ToolCatalog``, frozen when the turn begins)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ostinato.models.base import ToolDefinition
from ostinato.tools.base import Tool
from ostinato.tools.functions import function_tool


class ToolRegistry:
    """Named tools; a name may be registered once."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> Tool:
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return tool

    def tool(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        **options: Any,
    ) -> Any:
        """Decorator: register a Python function as a tool (see ``function_tool``)."""

        def register(f: Callable[..., Any]) -> Callable[..., Any]:
            self.add(function_tool(f, **options))
            return f

        return register(fn) if fn is not None else register

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def catalog(
        self,
        allow: Iterable[str] | None = None,
        *,
        disabled: Iterable[str] = (),
        protected: Iterable[str] = (),
    ) -> ToolCatalog:
        """The tools a turn offers, frozen: allowed by the skill (``allow``; None allows
        all), not switched off by the user (``disabled``, except the ``protected`` ones),
        and available now (each tool's own check)."""
        allowed = None if allow is None else set(allow)
        off = set(disabled) - set(protected)
        offered: list[Tool] = []
        unavailable: set[str] = set()
        for tool in self._tools.values():
            if (allowed is not None and tool.name not in allowed) or tool.name in off:
                continue
            if tool.available is not None and not tool.available():
                unavailable.add(tool.name)
                continue
            offered.append(tool)
        withheld = frozenset(self._tools) - (allowed if allowed is not None else set(self._tools))
        return ToolCatalog(
            tuple(offered),
            known=frozenset(self._tools),
            withheld=withheld,
            switched_off=frozenset(off & set(self._tools)) - withheld,
            unavailable=frozenset(unavailable),
        )


@dataclass(frozen=True, slots=True)
class ToolCatalog:
    """The tools offered to one turn, frozen at its start. ``lookup`` tells apart the
    reasons a name cannot be called: unknown, withheld from this skill, switched off by
    the user, or not available right now."""

    tools: tuple[Tool, ...]
    known: frozenset[str] = frozenset()
    withheld: frozenset[str] = frozenset()
    switched_off: frozenset[str] = frozenset()
    unavailable: frozenset[str] = frozenset()
    definitions: tuple[ToolDefinition, ...] = ()
    by_name: dict[str, Tool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "definitions", tuple(t.definition for t in self.tools))
        object.__setattr__(self, "by_name", {t.name: t for t in self.tools})

    def lookup(self, name: str) -> Tool | str:
        """The tool, or the sentence telling the model why it cannot be called."""
        tool = self.by_name.get(name)
        if tool is not None:
            return tool
        if name in self.withheld:
            return f"the tool {name!r} exists but is not allowed for this skill; do not call it"
        if name in self.switched_off:
            return f"the tool {name!r} is switched off by the user; do not call it"
        if name in self.unavailable:
            return f"the tool {name!r} is not available right now"
        offered = ", ".join(sorted(self.by_name)) or "none"
        return f"there is no tool named {name!r}; the tools you can call are: {offered}"
