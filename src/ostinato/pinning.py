"""Which version of an agent a conversation runs (``ostinato.versions``; the store keeps
them: ``store.versions``).

``Pinning.record`` makes a version of each agent whose content changed, at start and at
each configuration reload. ``resolve`` gives the agent a conversation's turn runs: the
version the conversation is pinned to (pinned when the conversation is made, or on its
first turn with an agent made later, to the version current then), or the current one
when it follows the latest. A version that is not the current one is rebuilt from its
stored content, so a paused approval, a card, a queued message and later turns keep
running under the version they began with.
"""

from __future__ import annotations

from collections.abc import Sequence

from ostinato.skills import Skill
from ostinato.store.base import utcnow
from ostinato.store.versions import VersionStore
from ostinato.versions import AgentVersion, content_of, hash_of, skill_of


class Pinning:
    def __init__(self, store: VersionStore) -> None:
        self.store = store
        self.current: dict[str, AgentVersion] = {}
        self._skills: dict[tuple[str, int], Skill] = {}

    async def record(self, skills: Sequence[Skill]) -> list[AgentVersion]:
        """Record the agents as they are now: a new version of each one that changed."""
        now = utcnow()
        for skill in skills:
            content = content_of(skill)
            found = await self.store.record_agent_version(skill.id, hash_of(content), content, now)
            self.current[skill.id] = found
            self._skills[(skill.id, found.number)] = skill
        return [self.current[s.id] for s in skills]

    def pins(self) -> tuple[tuple[str, int | None], ...]:
        """Every agent's current version: a new conversation's pins, written with it
        (``CreateConversation.pins``)."""
        return tuple((agent, version.number) for agent, version in self.current.items())

    async def resolve(self, conversation_id: str, skill: Skill) -> tuple[Skill, int | None]:
        """The agent ``skill`` names as this conversation runs it, and its version number
        (None: not versioned, the library's own agents)."""
        current = self.current.get(skill.id)
        if current is None:
            return skill, None
        pins = await self.store.conversation_versions(conversation_id)
        if skill.id not in pins:
            await self.store.pin_versions(conversation_id, {skill.id: current.number})
            return skill, current.number
        pinned = pins[skill.id]
        if pinned is None or pinned == current.number:
            return skill, current.number
        return await self.skill(skill.id, pinned) or skill, pinned

    async def skill(self, agent: str, number: int) -> Skill | None:
        found = self._skills.get((agent, number))
        if found is None:
            version = await self.store.agent_version(agent, number)
            if version is None:
                return None
            found = self._skills[(agent, number)] = skill_of(version.content)
        return found
