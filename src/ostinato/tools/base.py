"""Tools: what a model may call, and the catalog a turn offers.

A ``Tool`` is a name, a JSON schema, a category, a risk, a deadline and an async ``run``.
``validate`` checks arguments against the schema before ``run`` ever sees them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from ostinato.messages import JSON
from ostinato.models.base import ToolDefinition

Category: TypeAlias = Literal["read", "action", "ui", "agent"]
Risk: TypeAlias = Literal["safe", "write", "exec", "network"]


@dataclass(slots=True)
class ToolContext:
    """What a running tool may know about the turn it runs in.

    ``workdir`` is the conversation's working directory (file and shell tools are jailed
    to it); ``progress`` reports a line of progress to the surfaces watching.
    """

    conversation_id: str
    turn_id: str
    run_id: str
    tool_use_id: str
    owner: str | None = None
    workdir: Path | None = None
    progress: Callable[[str], None] | None = None
    extras: dict[str, Any] = field(default_factory=dict)


Runner: TypeAlias = Callable[[JSON, ToolContext], Awaitable[Any]]
Validator: TypeAlias = Callable[[JSON], JSON]


def _accept(arguments: JSON) -> JSON:
    return arguments


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    parameters: JSON
    run: Runner
    validate: Validator = _accept
    category: Category = "action"
    risk: Risk = "safe"
    idempotent: bool = True
    timeout: float = 30.0
    available: Callable[[], bool] | None = None
    # The tool's notion of a family of calls, for remembered approvals (e.g. a shell
    # command's program name); None when a call belongs to no family a grant may cover.
    family: Callable[[JSON], str | None] | None = None

    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(self.name, self.description, self.parameters)


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
        from ostinato.tools.functions import function_tool

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
