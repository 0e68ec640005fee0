"""A deployment: the runtime that ``ostinato serve`` runs, built from the settings.

``build_runtime`` turns a validated ``Config`` into a ``Runtime``: skills and the router
(with its cheap-tier classifier), tiers resolved to models, the compaction summariser,
the approval policy, the after-turn fact extraction when it is on, and the tool mount
(``ostinato.sources``: built-ins, then OpenAPI documents, then MCP servers).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ostinato import observe
from ostinato.agents import AgentConfig
from ostinato.approvals import ApprovalPolicy
from ostinato.config import AgentSection, Config, ConfigError, ModelsSection, guidelines_for
from ostinato.context.catalog import ContextCatalog
from ostinato.context.compaction import Compactor
from ostinato.loop.opening import AfterTurn
from ostinato.memory.extraction import FactExtractor
from ostinato.memory.facts import Memory
from ostinato.memory.ranking import default_ranker
from ostinato.models.base import Model
from ostinato.models.choice import Tiers, create_model
from ostinato.models.providers import ProviderSettings, is_local
from ostinato.observe import prices
from ostinato.pinning import Pinning
from ostinato.runtime import Runtime
from ostinato.skills import Router, Skill
from ostinato.sources import mcp_clients, tool_sources
from ostinato.spend.gate import SpendGate
from ostinato.store.base import Store
from ostinato.store.spend import SpendStore
from ostinato.store.versions import VersionStore
from ostinato.titles import AfterTurns, ModelFor, Titler
from ostinato.tools.fetch import Fetcher, FetchPolicy, parse_allow_hosts
from ostinato.tools.forge.limits import Limits
from ostinato.tools.forge.pool import Sandbox
from ostinato.tools.mounting import Mount

if TYPE_CHECKING:
    from ostinato.tools.mcp import McpClients
    from ostinato.tools.personal_mcp import PersonalMcp


def provider_settings(models: ModelsSection) -> ProviderSettings:
    """The ``[models]`` settings the providers need."""
    return ProviderSettings(
        base_url=models.base_url,
        api_key=models.api_key.get_secret_value() if models.api_key else None,
        thinking_budget=models.thinking_budget,
        reasoning_effort=models.reasoning_effort,
        idle_timeout=models.idle_timeout,
        max_requests=models.max_requests,
    )


def extracts_facts(config: Config, summarizer_id: str, env: Mapping[str, str]) -> bool:
    """Whether the after-turn fact extraction runs: ``memory.extract_facts`` when set,
    else only when the summarizer is a hosted model (not a local one, whose extra call
    after every turn would cost the person's own machine)."""
    if config.memory.extract_facts is not None:
        return config.memory.extract_facts
    return not is_local(summarizer_id, env)


class Models:
    """Tier names and ``provider:model`` ids to models, each made once."""

    def __init__(
        self, default_id: str, tiers: Tiers, settings: ProviderSettings | None = None
    ) -> None:
        self.default_id = default_id
        self.tiers = tiers
        self.settings = settings or ProviderSettings()
        self._made: dict[str, Model] = {}

    def resolve(self, tier_or_id: str) -> str:
        return tier_or_id if ":" in tier_or_id else self.tiers.resolve(tier_or_id)

    def __call__(self, tier_or_id: str) -> Model:
        model_id = self.resolve(tier_or_id)
        model = self._made.get(model_id)
        if model is None:
            model = self._made[model_id] = create_model(model_id, settings=self.settings)
        return model


@dataclass(slots=True)
class Deployment:
    runtime: Runtime
    models: Models
    mcp: McpClients | None = None  # when MCP servers are configured
    facts: bool = False  # facts about the person are extracted after each answered turn

    async def aclose(self) -> None:
        if self.mcp is not None:
            await self.mcp.aclose()
        if self.runtime.personal_mcp is not None:
            await self.runtime.personal_mcp.aclose()


def skills_of(config: Config, policy: ApprovalPolicy) -> list[Skill]:
    agents = config.agents or [config.default_agent()]
    return [_skill(agent, config, policy) for agent in agents]


def _skill(agent: AgentSection, config: Config, policy: ApprovalPolicy) -> Skill:
    settings = AgentConfig(
        name=agent.id,
        system_prompt=guidelines_for(agent.prompt, config.guidelines.rules),
        max_model_calls=agent.max_model_calls,
        tools=tuple(agent.tools) if agent.tools is not None else None,
        history_messages=agent.history_messages,
        request_instructions=agent.request_instructions,
    )
    approvals = (
        ApprovalPolicy(frozenset(agent.ask_for), policy.timeout)
        if agent.ask_for is not None
        else None
    )
    return Skill(agent.id, settings, agent.persona, agent.description, agent.tier, approvals)


async def build_runtime(
    config: Config,
    store: Store,
    *,
    default_model: Model,
    default_id: str,
    data_dir: Path,
    approval_timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    reported_window: int | None = None,
) -> Deployment:
    """The runtime the settings describe; ``reported_window``: the default model's
    context window as its server reported it (``models.context_windows`` wins)."""
    env = os.environ if env is None else env
    prices.configure(
        {model: prices.Price(**p.model_dump()) for model, p in config.observability.prices.items()}
    )
    observe.keep_timelines(config.observability.timeline)
    tiers = Tiers.for_default(default_id, config.models.tiers)
    models = Models(default_id, tiers, provider_settings(config.models))
    models._made[default_id] = default_model
    policy = ApprovalPolicy(
        frozenset(config.approvals.ask_for), approval_timeout or config.approvals.timeout
    )
    skills = skills_of(config, policy)
    default_skill = next((s for s in skills if s.id == config.default_agent().id), skills[0])
    classifier = models(config.models.router) if len(skills) > 1 else None
    mcp = mcp_clients(config)
    memory = Memory(
        store, default_ranker(config.memory.embedding_model), capacity=config.memory.capacity
    )
    sandbox = sandbox_of(config)
    mcp, personal = personal_mcp(config, store, mcp)
    sources = await tool_sources(config, memory, mcp, env, sandbox)
    mount = Mount([*sources, personal.source()] if personal else sources)
    runtime = Runtime(
        store,
        model=default_model,
        router=Router(skills, default=default_skill, classifier=classifier),
        models=models,
        mount=mount,
        approvals=policy,
        data_dir=data_dir,
        compactor=compactor_of(config, models, default_id, reported_window),
        disabled_tools=frozenset(config.tools.disabled),
        protected_tools=frozenset(config.tools.protected),
        memory=memory,
        sandbox=sandbox,
        spend=spend_gate(config, store),
    )
    facts = extracts_facts(config, models.resolve(config.models.summarizer), env)
    runtime.after_turn = after_turn_of(config, runtime, models, memory if facts else None)
    runtime.personal_mcp = personal
    if isinstance(store, VersionStore):  # a version of each agent that changed
        runtime.pinning = Pinning(store)
        await runtime.pinning.record(runtime.router.skills)
    return Deployment(runtime, models, mcp, facts=facts)


def compactor_of(
    config: Config, models: Models, default_id: str, reported_window: int | None
) -> Compactor:
    """The summariser, with the windows: the catalog's, the default model's as its server
    reported it, and ``models.context_windows`` over both."""
    reported = {default_id: reported_window} if reported_window else {}
    catalog = ContextCatalog(reported, config.models.context_windows)
    return Compactor(models(config.models.summarizer), catalog=catalog)


def after_turn_of(
    config: Config, runtime: Runtime, models: Models, memory: Memory | None
) -> AfterTurns:
    """The work after each answered turn: a title for an untitled conversation
    (``[data] titles``), then facts about the person, with ``memory``."""
    choice = config.data.titles
    model_for: ModelFor | None = None
    if choice == "conversation":
        model_for = runtime.model_for
    elif choice != "off":
        model_for = lambda conversation: models(choice)  # noqa: E731
    works: list[AfterTurn] = [Titler(runtime.store, model_for)]
    if memory is not None:
        works.append(FactExtractor(models(config.models.summarizer), memory))
    return AfterTurns(works)


def spend_gate(config: Config, store: Store) -> SpendGate | None:
    """What checks and counts every model call: the ``[budgets]`` limits over the store's
    spend (every store here keeps it)."""
    if not isinstance(store, SpendStore):
        return None
    return SpendGate(store, config.budgets.budgets())


def personal_mcp(
    config: Config, store: Store, mcp: McpClients | None
) -> tuple[McpClients | None, PersonalMcp | None]:
    """People's MCP servers, when ``tools.personal_mcp`` is on (the SDK is imported
    when one is first listed), sharing the operator's servers' session manager (or
    making one then)."""
    if not config.tools.personal_mcp:
        return mcp, None
    from ostinato.tools.personal_mcp import CredentialBox, PersonalMcp

    key = config.tools.mcp_secret_key
    try:
        box = CredentialBox(key.get_secret_value() if key else None)
    except ValueError as exc:
        raise ConfigError("tools.mcp_secret_key", [str(exc)]) from None
    return mcp, PersonalMcp(store, mcp, box, allow_private=config.tools.mcp_allow_private)


def sandbox_of(config: Config) -> Sandbox:
    """The forged tools' sandbox with ``[tools.sandbox]``'s limits; its ``fetch`` goes
    through the deployment's fetch policy (allow-list, address checks) with the sandbox's
    own size and time caps."""
    limits = config.tools.sandbox
    fetch = FetchPolicy(
        allow_hosts=parse_allow_hosts(config.tools.fetch_allow_hosts),
        max_bytes=limits.fetch_max_bytes,
        timeout=limits.fetch_timeout_s,
    )
    return Sandbox(
        limits=Limits(
            cpu_s=limits.cpu_s,
            wall_s=limits.wall_s,
            memory_bytes=limits.memory_bytes,
            stack_bytes=limits.stack_bytes,
            output_bytes=limits.output_bytes,
            fetches=limits.fetches,
        ),
        workers=limits.workers,
        fetcher=Fetcher(fetch),
        per_owner=limits.per_owner,
        runs_per_minute=limits.runs_per_minute,
    )
