"""Mounting tools from several sources into one registry, in a fixed order, and keeping
each source's status.

Sources mount in order: built-ins, Python-function tools, OpenAPI operations, MCP
servers. Names are sanitised by each source. A built-in wins a collision with any other
source (a later source's tool with a taken name is left out and reported, so a server
cannot shadow a built-in); two tools of one name within one source are a configuration
error (``ValueError``) raised when that source is mounted.

A dynamic source (an MCP server) is listed at the start of each turn, all of them at
once; one whose tools depend on the conversation too (forged tools: each conversation
keeps the versions it started with) has a ``conversation_lister``, given the owner and
the conversation's id (its ``lister`` serves when no conversation is named). One that
cannot be listed does not stop the turn: its tools are left out, and its status
(``Mount.status()``: ``ok``, ``failed`` with the error, or ``not listed yet``) says so,
as does a warning in the log when it starts failing. A static source that could not be
built (an OpenAPI document that would not load) is mounted empty, ``failed`` for good.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, TypeAlias

from ostinato.tools.base import Tool
from ostinato.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

ToolLister = Callable[[str | None], Awaitable[list[Tool]]]
"""Lists a dynamic source's tools for an owner (``None``: no owner), e.g. an MCP server."""

ConversationLister = Callable[[str | None, str | None], Awaitable[list[Tool]]]
"""Lists a dynamic source's tools for an owner in one conversation (``None``: none named,
as when the catalog is listed outside a turn)."""

SourceState: TypeAlias = Literal["ok", "failed", "not listed yet"]


@dataclass(frozen=True, slots=True)
class Source:
    name: str
    tools: Sequence[Tool] = ()
    lister: ToolLister | None = None  # dynamic tools, listed at the start of each turn
    conversation_lister: ConversationLister | None = None  # ... per conversation, if named
    builtin: bool = False
    error: str | None = None  # why a static source could not be built (it mounts empty)


@dataclass(frozen=True, slots=True)
class SourceStatus:
    """How a source fared the last time it was mounted."""

    name: str
    state: SourceState
    tools: int = 0  # tools it gave (before collisions)
    error: str | None = None
    checked_at: datetime | None = None


@dataclass(slots=True)
class Mounted:
    """One listing's tools. Which sources failed is ``Mount.status()`` (read by the
    banner, ``GET /v1/tools/sources`` and the log), not part of a listing."""

    registry: ToolRegistry
    shadowed: list[str] = field(default_factory=list)  # "source:tool" left out by a collision


class Mount:
    """The ordered tool sources of a deployment."""

    def __init__(self, sources: Sequence[Source]) -> None:
        self.sources = sorted(sources, key=lambda s: not s.builtin)  # built-ins first, stable
        for source in self.sources:
            _unique(source.name, source.tools)
        self._static: Mounted | None = None  # with no dynamic source, one registry serves
        self._status = {s.name: _first_status(s) for s in self.sources}

    def status(self) -> list[SourceStatus]:
        """Every source's status, in mount order."""
        return [self._status[s.name] for s in self.sources]

    async def registry(
        self, owner: str | None = None, conversation_id: str | None = None
    ) -> Mounted:
        """The tools for ``owner`` in ``conversation_id`` (the conversation matters only
        to a source with a ``conversation_lister``)."""
        if any(source.lister is not None for source in self.sources):
            return await self._mount(owner, conversation_id)
        if self._static is None:
            self._static = await self._mount(None, None)
        return self._static

    async def _mount(self, owner: str | None, conversation_id: str | None) -> Mounted:
        listings = await asyncio.gather(
            *(self._list(s, owner, conversation_id) for s in self.sources)
        )
        mounted = Mounted(ToolRegistry())
        for source, tools in zip(self.sources, listings, strict=True):
            for tool in tools:
                if tool.name in mounted.registry:
                    mounted.shadowed.append(f"{source.name}:{tool.name}")
                else:
                    mounted.registry.add(tool)
        return mounted

    async def _list(
        self, source: Source, owner: str | None, conversation_id: str | None
    ) -> list[Tool]:
        if source.lister is None:
            return list(source.tools)
        try:
            if conversation_id is not None and source.conversation_lister is not None:
                listed = await source.conversation_lister(owner, conversation_id)
            else:
                listed = await source.lister(owner)
        except Exception as exc:  # a server that is down must not stop the turn
            self._record(source.name, "failed", 0, f"{type(exc).__name__}: {exc}")
            return list(source.tools)
        _unique(source.name, listed)
        self._record(source.name, "ok", len(source.tools) + len(listed), None)
        return [*source.tools, *listed]

    def _record(self, name: str, state: SourceState, tools: int, error: str | None) -> None:
        before = self._status[name]
        if state == "failed" and (before.state != "failed" or before.error != error):
            log.warning("tool source %s failed: its tools are left out: %s", name, error)
        elif state == "ok" and before.state == "failed":
            log.warning("tool source %s answers again (%d tools)", name, tools)
        self._status[name] = SourceStatus(name, state, tools, error, datetime.now(UTC))


def _first_status(source: Source) -> SourceStatus:
    if source.error is not None:
        log.warning("tool source %s failed: its tools are left out: %s", source.name, source.error)
        return SourceStatus(source.name, "failed", 0, source.error, datetime.now(UTC))
    if source.lister is not None:
        return SourceStatus(source.name, "not listed yet")
    return SourceStatus(source.name, "ok", len(source.tools), None, datetime.now(UTC))


def _unique(source: str, tools: Sequence[Tool]) -> None:
    names = [t.name for t in tools]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"tool source {source!r} has two tools named {', '.join(repeated)}")
