"""Per-agent settings of the surfaces that translate turns for other protocols (the
OpenAI-compatible endpoint, the AI SDK stream): the output filters each applies, and how
``/v1/chat/completions`` runs its turns. ``serve`` builds them from ``[[agents]]``;
``Surfaces()`` (no agents) gives every agent the defaults."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ostinato.filters import NO_FILTERS, OutputFilters
from ostinato.turns import Policy

if TYPE_CHECKING:
    from ostinato.config import AgentSection, FilterSettings

Surface = Literal["openai", "ai_sdk"]


@dataclass(frozen=True, slots=True)
class AgentSurfaces:
    filters: Mapping[str, OutputFilters] = field(default_factory=dict)  # by surface
    policy: Policy = "supersede"  # a completion's message while a turn runs
    progress: bool = False  # tool steps as reasoning_content

    def filters_for(self, surface: Surface) -> OutputFilters:
        return self.filters.get(surface, NO_FILTERS)


DEFAULTS = AgentSurfaces()


@dataclass(frozen=True, slots=True)
class Surfaces:
    agents: Mapping[str, AgentSurfaces] = field(default_factory=dict)  # by skill id
    default_agent: str | None = None

    def of(self, skill_id: str | None) -> AgentSurfaces:
        """An agent's settings (the default agent's for ``None``)."""
        found = self.agents.get(skill_id or self.default_agent or "")
        return found if found is not None else DEFAULTS

    def filters(self, surface: Surface) -> Callable[[str | None], OutputFilters]:
        """The filters of ``surface`` for the agent a turn names (``turn.started``)."""
        return lambda skill_id: self.of(skill_id).filters_for(surface)


def surfaces_of(agents: Sequence[AgentSection], default_agent: str | None) -> Surfaces:
    """The settings of each configured agent."""
    return Surfaces({agent.id: _agent(agent) for agent in agents}, default_agent)


def _agent(agent: AgentSection) -> AgentSurfaces:
    own = _over(NO_FILTERS, agent.filters)
    return AgentSurfaces(
        {
            "openai": _over(own, agent.filters.openai),
            "ai_sdk": _over(own, agent.filters.ai_sdk),
        },
        agent.completions.policy,
        agent.completions.progress,
    )


def _over(base: OutputFilters, settings: FilterSettings) -> OutputFilters:
    return base.over(
        strip_tool_syntax=settings.strip_tool_syntax,
        strip_json_fences=settings.strip_json_fences,
        drop_phrases=tuple(settings.drop_phrases) if settings.drop_phrases is not None else None,
        shorten_urls=settings.shorten_urls,
    )
