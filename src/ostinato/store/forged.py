"""The store's side of forged tools: tools a person (or their agent) wrote as one
JavaScript function, kept per owner with every version.

Saving a tool under a name it already has is an edit: a new version, the old ones kept.
Removing a tool marks its newest version removed; saving the name again starts a new
version after the removed one, so the history is never lost. Which version a turn
mounts is ``tools.forge.versions``'s rule: a conversation keeps the versions it started
with (and a running turn the ones it began with).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeAlias

from ostinato.errors import InvalidRequest
from ostinato.messages import JSON

NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")  # mounted as my_<name>: 64 characters at most
DESCRIPTION_LIMIT = 1_000


@dataclass(frozen=True, slots=True)
class ForgedTool:
    """One version of an owner's forged tool."""

    owner: str
    name: str  # without the ``my_`` it is mounted with
    version: int  # 1, 2, ... per (owner, name)
    description: str
    parameters: JSON  # the JSON schema of its arguments object
    code: str  # one JavaScript function expression
    created_at: datetime
    removed_at: datetime | None = None  # set on the newest version when removed
    conversation_id: str | None = None  # where it was made, when a model made it

    @property
    def tool_name(self) -> str:
        return f"my_{self.name}"


def check_name(name: str) -> str:
    """A forged tool's name (``my_`` is added when it is mounted); ``InvalidRequest``
    unless it is lower case letters, digits and ``_``, starting with a letter."""
    if name.startswith("my_"):
        name = name[3:]
    if not NAME.match(name):
        raise InvalidRequest(
            f"a tool's name is 1 to 41 lower-case letters, digits or _, starting with a "
            f"letter (it is called my_<name>); {name[:60]!r} is not"
        )
    return name


# --- write ops -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SaveForgedTool:
    """Store a new version of ``owner``'s tool ``name`` (version 1 if it never existed);
    returns the stored ``ForgedTool``."""

    owner: str
    name: str
    description: str
    parameters: JSON
    code: str
    conversation_id: str | None = None


@dataclass(frozen=True, slots=True)
class RemoveForgedTool:
    """Mark the newest version of ``owner``'s tool removed; returns it. ``NotFound`` when
    the owner has no such tool (or it is removed already)."""

    owner: str
    name: str


ForgedOp: TypeAlias = SaveForgedTool | RemoveForgedTool
FORGED_OPS: tuple[type, ...] = (SaveForgedTool, RemoveForgedTool)


class ForgedReads(Protocol):
    async def forged_tools(self, owner: str) -> list[ForgedTool]:
        """The newest version of each of ``owner``'s tools that is not removed, by name."""
        ...

    async def forged_tool_versions(self, owner: str, name: str) -> list[ForgedTool]:
        """Every version of one tool, oldest first (removed ones too)."""
        ...
