"""Agent versions in the store (``ostinato.versions``): every version of every agent, and
the version each conversation is pinned to. A small API other parts read (the Agent
Protocol maps an assistant to an agent and its versions):

- ``record_agent_version(agent, hash, content)``: the agent's newest version if its hash
  is ``hash``, else a new one numbered after it (two servers recording the same content
  at once get one version);
- ``agent_versions(agent)``: its versions, oldest first; ``agent_version(agent, n)``;
- ``conversation_versions(conversation_id)``: agent -> the version it is pinned to
  (``None``: it follows the latest);
- ``pin_versions(conversation_id, pins, move=False)``: pin agents not pinned yet (or,
  with ``move``, set them whatever they were).

Written apart from ``Store.write``, each method one small transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Protocol, runtime_checkable

from ostinato.messages import JSON
from ostinato.versions import AgentVersion


@runtime_checkable
class VersionStore(Protocol):
    async def record_agent_version(
        self, agent: str, hash: str, content: JSON, now: datetime
    ) -> AgentVersion: ...

    async def agent_versions(self, agent: str) -> list[AgentVersion]: ...

    async def agent_version(self, agent: str, number: int) -> AgentVersion | None: ...

    async def conversation_versions(self, conversation_id: str) -> dict[str, int | None]: ...

    async def pin_versions(
        self, conversation_id: str, pins: Mapping[str, int | None], *, move: bool = False
    ) -> None: ...


class MemoryVersions:
    """``VersionStore`` for ``MemoryStore``."""

    _agent_versions: dict[str, list[AgentVersion]]
    _pins: dict[str, dict[str, int | None]]

    async def record_agent_version(
        self, agent: str, hash: str, content: JSON, now: datetime
    ) -> AgentVersion:
        found = self._agent_versions.setdefault(agent, [])
        if found and found[-1].hash == hash:
            return found[-1]
        made = AgentVersion(agent, len(found) + 1, hash, content)
        found.append(made)
        return made

    async def agent_versions(self, agent: str) -> list[AgentVersion]:
        return list(self._agent_versions.get(agent, []))

    async def agent_version(self, agent: str, number: int) -> AgentVersion | None:
        found = self._agent_versions.get(agent, [])
        return found[number - 1] if 0 < number <= len(found) else None

    async def conversation_versions(self, conversation_id: str) -> dict[str, int | None]:
        return dict(self._pins.get(conversation_id, {}))

    async def pin_versions(
        self, conversation_id: str, pins: Mapping[str, int | None], *, move: bool = False
    ) -> None:
        held = self._pins.setdefault(conversation_id, {})
        for agent, number in pins.items():
            if move or agent not in held:
                held[agent] = number
