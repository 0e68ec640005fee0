"""Skills and the router that picks one at the top of each turn.

A **skill** is an agent manifest: a prompt (with the shared guidelines), a persona (the
label a user sees), a model tier, a budget, a tool allow-list and an approval policy.

The **router** runs once per turn, in this order:

1. a slash command (``/name rest of the message``) naming a skill id or a persona;
2. the conversation's sticky persona (the persona of its last routed turn): its skill,
   or, when the persona has several, the classifier's pick among them;
3. a cheap-tier classifier call that picks among all skills by their descriptions;
4. the default skill.

The chosen skill, persona and tier are recorded on the turn (its first row's metadata and
metrics) and sent in ``turn.started``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ostinato import observe
from ostinato.agents import AgentConfig
from ostinato.approvals import ApprovalPolicy
from ostinato.errors import ModelError
from ostinato.messages import JSON, Message, TextBlock
from ostinato.models.assembly import complete
from ostinato.models.base import Model, ModelRequest

SLASH = re.compile(r"^\s*/([A-Za-z0-9_-]+)(?:\s+(.*))?$", re.DOTALL)
CLASSIFY_PROMPT = (
    "You route a user's message to the one skill best suited to answer it. Reply with the "
    "skill's id and nothing else.\n\nSkills:\n{skills}"
)


@dataclass(frozen=True, slots=True)
class Skill:
    id: str
    agent: AgentConfig
    persona: str | None = None
    description: str = ""
    tier: str = "allegro"
    approvals: ApprovalPolicy | None = None

    @property
    def label(self) -> str:
        return self.persona or self.id


@dataclass(frozen=True, slots=True)
class Route:
    skill: Skill
    reason: str  # "slash" | "sticky" | "classifier" | "default"
    text: str | None = None  # the message without its slash command, when one was used
    detail: JSON = field(default_factory=dict)

    @property
    def record(self) -> JSON:
        """What the turn records about its route."""
        return {
            "skill": self.skill.id,
            "persona": self.skill.persona,
            "tier": self.skill.tier,
            "reason": self.reason,
            **self.detail,
        }


class Router:
    def __init__(
        self,
        skills: Sequence[Skill],
        *,
        default: Skill | None = None,
        classifier: Model | None = None,
        timeout: float = 15.0,
    ) -> None:
        if not skills and default is None:
            raise ValueError("a router needs at least one skill")
        self.skills = list(skills) or [default]  # type: ignore[list-item]
        self.default = default or self.skills[0]
        self.classifier = classifier
        self.timeout = timeout
        self._by_name = {s.id.lower(): s for s in self.skills}
        for skill in self.skills:
            if skill.persona:
                self._by_name.setdefault(skill.persona.lower(), skill)

    def get(self, skill_id: str | None) -> Skill | None:
        return self._by_name.get(skill_id.lower()) if skill_id else None

    async def route(self, text: str, *, sticky_persona: str | None = None) -> Route:
        """The skill for a message (the rules in the module's docstring, in order); the
        routing is observed (``ostinato.observe``), its classifier call with it."""
        with observe.operation("route") as work:
            route = await self._route(text, sticky_persona)
            work.note(skill=route.skill.id, reason=route.reason)
        return route

    async def _route(self, text: str, sticky_persona: str | None) -> Route:
        command = SLASH.match(text)
        if command:
            named = self._by_name.get(command.group(1).lower())
            if named is not None:
                rest = (command.group(2) or "").strip()
                return Route(named, "slash", rest or None)
        if sticky_persona:
            mine = [s for s in self.skills if (s.persona or "").lower() == sticky_persona.lower()]
            if len(mine) == 1:
                return Route(mine[0], "sticky")
            if mine:
                return await self._classify(text, mine, "sticky")
        if len(self.skills) > 1 and self.classifier is not None:
            return await self._classify(text, self.skills, "classifier")
        return Route(self.default, "default")

    async def _classify(self, text: str, among: Sequence[Skill], reason: str) -> Route:
        fallback = among[0] if reason == "sticky" else self.default
        if self.classifier is None:
            return Route(fallback, reason if reason == "sticky" else "default")
        listing = "\n".join(f"- {s.id}: {s.description or s.label}" for s in among)
        request = ModelRequest(
            system=CLASSIFY_PROMPT.format(skills=listing),
            messages=(Message("user", (TextBlock(text[:4000]),)),),
            tool_choice="none",
            max_tokens=20,
        )
        try:
            reply = await complete(self.classifier, request, deadline=self.timeout, what="router")
            answer = reply.message.text
        except ModelError as exc:
            return Route(fallback, "default", detail={"classifier_error": str(exc)[:200]})
        ids = {s.id.lower(): s for s in among}
        for word in re.findall(r"[A-Za-z0-9_-]+", answer.lower()):
            if word in ids:
                return Route(ids[word], reason if reason == "sticky" else "classifier")
        return Route(fallback, "default", detail={"classifier_answer": answer[:100]})


def sticky_persona(rows: Sequence[Message]) -> str | None:
    """The persona of the conversation's last routed turn, read from the window's rows."""
    for row in reversed(rows):
        if row.role == "user":  # only a person's row is routed: no other is asked
            route = row.metadata.get("route")
            if isinstance(route, dict) and route.get("persona"):
                return str(route["persona"])
    return None


def last_skill(rows: Sequence[Message]) -> str | None:
    """The skill of the conversation's last routed turn (a resumed turn keeps it)."""
    for row in reversed(rows):
        if row.role == "user":  # only a person's row is routed: no other is asked
            route = row.metadata.get("route")
            if isinstance(route, dict) and route.get("skill"):
                return str(route["skill"])
    return None
