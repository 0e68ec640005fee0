"""A deployment: the runtime that ``ostinato serve`` runs, built from the config file.

``build_runtime`` turns a validated ``Config`` into a ``Runtime``: skills and the router
(with its cheap-tier classifier), tiers resolved to models, the compaction summariser,
the approval policy, and the tool mount (built-ins, workdir tools, ``http_fetch``,
memory, sub-agents, then OpenAPI documents, then MCP servers).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ostinato.agents import AgentConfig
from ostinato.approvals import ApprovalPolicy
from ostinato.config import AgentSection, Config, ConfigError, ModelsSection, guidelines_for
from ostinato.context.catalog import ContextCatalog
from ostinato.context.compaction import Compactor
from ostinato.memory.extraction import FactExtractor
from ostinato.memory.facts import Memory
from ostinato.memory.ranking import default_ranker
from ostinato.memory.tools import memory_tools
from ostinato.models.base import Model
from ostinato.models.choice import Tiers, create_model
from ostinato.models.providers import ProviderSettings, is_local
from ostinato.runtime import Runtime
from ostinato.skills import Router, Skill
from ostinato.store.base import Store
from ostinato.subagents import subagent_tools
from ostinato.tools.base import Tool
from ostinato.tools.builtins import default_registry
from ostinato.tools.fetch import http_fetch_tool
from ostinato.tools.mcp import McpClients, McpServerConfig, McpToolCache, mcp_tools
from ostinato.tools.mounting import Mount, Source, ToolLister
from ostinato.tools.openapi import ApiKeyAuth, Auth, BasicAuth, BearerAuth, load_openapi
from ostinato.tools.openapi import openapi_tools as build_openapi_tools


def provider_settings(models: ModelsSection) -> ProviderSettings:
    """The ``[models]`` settings the providers need."""
    return ProviderSettings(
        base_url=models.base_url,
        api_key=models.api_key.get_secret_value() if models.api_key else None,
        thinking_budget=models.thinking_budget,
        reasoning_effort=models.reasoning_effort,
        idle_timeout=models.idle_timeout,
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
    mcp: McpClients = field(default_factory=McpClients)

    async def aclose(self) -> None:
        await self.mcp.aclose()


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
) -> Deployment:
    env = os.environ if env is None else env
    tiers = Tiers.for_default(default_id, config.models.tiers)
    models = Models(default_id, tiers, provider_settings(config.models))
    models._made[default_id] = default_model
    policy = ApprovalPolicy(
        frozenset(config.approvals.ask_for), approval_timeout or config.approvals.timeout
    )
    skills = skills_of(config, policy)
    default_skill = next((s for s in skills if s.id == config.default_agent().id), skills[0])
    classifier = models(config.models.router) if len(skills) > 1 else None
    mcp = McpClients()
    memory = Memory(
        store, default_ranker(config.memory.embedding_model), capacity=config.memory.capacity
    )
    mount = Mount(
        [
            Source("builtins", _builtins(config, memory), builtin=True),
            *[Source(f"openapi:{s.name}", await _openapi(s, env)) for s in config.tools.openapi],
            *[Source(f"mcp:{s.name}", lister=_mcp(s, mcp)) for s in config.tools.mcp],
        ]
    )
    runtime = Runtime(
        store,
        model=default_model,
        router=Router(skills, default=default_skill, classifier=classifier),
        models=models,
        mount=mount,
        approvals=policy,
        data_dir=data_dir,
        compactor=Compactor(
            models(config.models.summarizer),
            catalog=ContextCatalog(config.models.context_windows),
        ),
        disabled_tools=frozenset(config.tools.disabled),
        protected_tools=frozenset(config.tools.protected),
        after_turn=(
            FactExtractor(models(config.models.summarizer), memory)
            if extracts_facts(config, models.resolve(config.models.summarizer), env)
            else None
        ),
        memory=memory,
    )
    return Deployment(runtime, models, mcp)


def _builtins(config: Config, memory: Memory) -> list[Tool]:
    return [
        *default_registry(),
        http_fetch_tool(allow_hosts=config.tools.fetch_allow_hosts),
        *memory_tools(memory.store, memory.ranker, capacity=memory.capacity),
        *subagent_tools(),
    ]


async def _openapi(source: object, env: Mapping[str, str]) -> list[Tool]:
    from ostinato.config import OpenApiSource

    assert isinstance(source, OpenApiSource)
    try:
        document = await load_openapi(source.url)
    except Exception as exc:
        where = f"tools.openapi {source.name!r}"
        raise ConfigError(where, [f"cannot load {source.url}: {exc}"]) from exc
    return build_openapi_tools(
        document,
        base_url=source.base_url,
        auth=_auth(source.name, source.auth, env),
        prefix=source.prefix or source.name,
    )


def _auth(name: str, spec: Mapping[str, str] | None, env: Mapping[str, str]) -> Auth | None:
    """``{type = "bearer", token_env}``, ``{type = "api_key", name, value_env, location}``
    or ``{type = "basic", username, password_env}``; secrets come from the environment."""
    if not spec:
        return None
    where = f"tools.openapi {name!r}.auth"

    def secret(key: str) -> str:
        variable = spec.get(key)
        if not variable:
            raise ConfigError(where, [f"{key} is required (the variable holding the secret)"])
        value = env.get(variable)
        if value is None:
            raise ConfigError(where, [f"the environment variable {variable} is not set"])
        return value

    kind = spec.get("type")
    if kind == "bearer":
        return BearerAuth(secret("token_env"))
    if kind == "api_key":
        location = spec.get("location", "header")
        if location not in ("header", "query"):
            raise ConfigError(where, ["location must be 'header' or 'query'"])
        return ApiKeyAuth(spec.get("name", "X-API-Key"), secret("value_env"), location)  # type: ignore[arg-type]
    if kind == "basic":
        return BasicAuth(spec.get("username", ""), secret("password_env"))
    raise ConfigError(where, [f"type must be bearer, api_key or basic, not {kind!r}"])


def _mcp(source: object, clients: McpClients) -> ToolLister:
    from ostinato.config import McpSource

    assert isinstance(source, McpSource)
    config = McpServerConfig(
        name=source.name,
        command=source.command,
        args=tuple(source.args),
        env=dict(source.env) or None,
        url=source.url,
        headers=dict(source.headers) or None,
    )
    cache = McpToolCache()

    async def lister(owner: str | None) -> list[Tool]:
        return await mcp_tools(
            config, cache=cache, clients=clients, owner=owner if source.per_user else None
        )

    return lister
