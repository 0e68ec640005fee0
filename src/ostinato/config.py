"""The configuration file: ``ostinato.toml``.

One file declares the agents (skills), tiers, providers, tool sources, approval policy
and shared guidelines. Its path comes from ``--config`` or ``OSTINATO_CONFIG`` (default
``./ostinato.toml`` when it exists; without a file the built-in defaults apply).
Environment variables override the file: ``OSTINATO_DATABASE_URL``, ``OSTINATO_DATA_DIR``,
``OSTINATO_MODEL`` and ``OSTINATO_TIER_<NAME>``.

``load_config`` validates everything and raises ``ConfigError`` whose lines each say what
is wrong and where (``agents[1].tier: unknown tier 'fast' ...``); ``ostinato check-config``
prints them.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ostinato.agents import DEFAULT_SYSTEM_PROMPT
from ostinato.identity.settings import AuthSettings

CONFIG_ENV = "OSTINATO_CONFIG"
DEFAULT_PATH = Path("ostinato.toml")
TIER_NAMES = ("minuet", "allegro", "forte")


class ConfigError(ValueError):
    """The configuration is invalid; ``problems`` are lines ``where: what``."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: " + "; ".join(problems))


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSection(_Section):
    database_url: str | None = None
    data_dir: str = "ostinato-data"
    allowed_origins: list[str] = Field(default_factory=list)


class ModelsSection(_Section):
    default: str | None = Field(
        default=None, description="A model id (provider:model) or a tier; None: autodetect."
    )
    tiers: dict[str, str] = Field(default_factory=dict)
    router: str = Field(default="minuet", description="The tier (or id) of the classifier.")
    summarizer: str = Field(default="minuet", description="The tier (or id) for compaction.")


RiskName = Literal["safe", "write", "exec", "network"]


def _ask_by_default() -> list[RiskName]:
    return ["write", "exec"]


class ApprovalsSection(_Section):
    ask_for: list[RiskName] = Field(default_factory=_ask_by_default)
    timeout: float = Field(default=300.0, gt=0)


class MemorySection(_Section):
    extract_facts: bool = Field(
        default=True, description="After each answered turn, keep facts about the user."
    )
    capacity: int = Field(default=5_000, ge=1, description="Current facts per user, at most.")


class GuidelinesSection(_Section):
    rules: list[str] = Field(default_factory=list)


class AgentSection(_Section):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")
    persona: str | None = None
    description: str = ""
    prompt: str = DEFAULT_SYSTEM_PROMPT
    tier: str = "allegro"
    max_model_calls: int = Field(default=10, ge=1, le=200)
    tools: list[str] | None = None
    ask_for: list[Literal["safe", "write", "exec", "network"]] | None = None
    default: bool = False
    history_messages: int = Field(default=40, ge=1)


class OpenApiSource(_Section):
    name: str
    url: str
    base_url: str | None = None
    auth: dict[str, str] | None = None
    prefix: str | None = None


class McpSource(_Section):
    name: str
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    per_user: bool = False


class ToolsSection(_Section):
    disabled: list[str] = Field(default_factory=list)
    protected: list[str] = Field(default_factory=lambda: ["ask_user", "read_attachment"])
    fetch_allow_hosts: list[str] = Field(default_factory=list)
    openapi: list[OpenApiSource] = Field(default_factory=list)
    mcp: list[McpSource] = Field(default_factory=list)


class Config(_Section):
    server: ServerSection = Field(default_factory=ServerSection)
    models: ModelsSection = Field(default_factory=ModelsSection)
    approvals: ApprovalsSection = Field(default_factory=ApprovalsSection)
    guidelines: GuidelinesSection = Field(default_factory=GuidelinesSection)
    memory: MemorySection = Field(default_factory=MemorySection)
    agents: list[AgentSection] = Field(default_factory=list)
    tools: ToolsSection = Field(default_factory=ToolsSection)
    auth: AuthSettings = Field(default_factory=AuthSettings)

    @field_validator("agents")
    @classmethod
    def _agents(cls, agents: list[AgentSection]) -> list[AgentSection]:
        ids = [a.id for a in agents]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"agent ids must be unique; repeated: {', '.join(duplicates)}")
        if sum(a.default for a in agents) > 1:
            raise ValueError("at most one agent may be the default")
        return agents

    def default_agent(self) -> AgentSection:
        for agent in self.agents:
            if agent.default:
                return agent
        return self.agents[0] if self.agents else AgentSection(id="assistant")


def load_config(
    path: str | Path | None = None, *, env: Mapping[str, str] | None = None
) -> tuple[Config, str]:
    """Read, override from the environment, validate. Returns the config and where it came
    from (a path, or "built-in defaults")."""
    env = os.environ if env is None else env
    source_path = Path(path) if path else Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else None
    if source_path is None and DEFAULT_PATH.exists():
        source_path = DEFAULT_PATH
    raw: dict[str, Any] = {}
    source = "built-in defaults"
    if source_path is not None:
        source = str(source_path)
        try:
            raw = tomllib.loads(source_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(source, ["the file does not exist"]) from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(source, [f"not valid TOML: {exc}"]) from None
    _apply_env(raw, env)
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(source, [_where(e) for e in exc.errors()]) from None
    problems = _cross_checks(config)
    if problems:
        raise ConfigError(source, problems)
    return config, source


def guidelines_for(prompt: str, rules: list[str]) -> str:
    """The agent's prompt with the shared rules appended, each rule once: a rule the
    prompt already states (case- and space-insensitively) is not repeated."""
    seen = _norm(prompt)
    extra: list[str] = []
    for rule in rules:
        key = _norm(rule)
        if key and key not in seen and all(key != _norm(r) for r in extra):
            extra.append(rule.strip())
    if not extra:
        return prompt
    return prompt.rstrip() + "\n\nGuidelines:\n" + "\n".join(f"- {r}" for r in extra)


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _apply_env(raw: dict[str, Any], env: Mapping[str, str]) -> None:
    server = raw.setdefault("server", {})
    models = raw.setdefault("models", {})
    if env.get("OSTINATO_DATABASE_URL"):
        server["database_url"] = env["OSTINATO_DATABASE_URL"]
    if env.get("OSTINATO_DATA_DIR"):
        server["data_dir"] = env["OSTINATO_DATA_DIR"]
    if env.get("OSTINATO_MODEL"):
        models["default"] = env["OSTINATO_MODEL"]
    tiers = models.setdefault("tiers", {})
    for name in TIER_NAMES:
        value = env.get(f"OSTINATO_TIER_{name.upper()}")
        if value:
            tiers[name] = value


def _cross_checks(config: Config) -> list[str]:
    problems = []
    tiers = set(TIER_NAMES) | set(config.models.tiers)
    for index, agent in enumerate(config.agents):
        if ":" not in agent.tier and agent.tier not in tiers:
            problems.append(
                f"agents[{index}].tier: unknown tier {agent.tier!r} (known: "
                f"{', '.join(sorted(tiers))}; or give a provider:model id)"
            )
    for name, value in config.models.tiers.items():
        if ":" not in value:
            problems.append(f"models.tiers.{name}: {value!r} is not a provider:model id")
    names = [s.name for s in config.tools.openapi] + [s.name for s in config.tools.mcp]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"tools: two tool sources are named {name!r}")
    for index, source in enumerate(config.tools.mcp):
        if (source.command is None) == (source.url is None):
            problems.append(f"tools.mcp[{index}]: give exactly one of 'command' or 'url'")
    return problems


def _where(error: Any) -> str:
    location = ""
    for part in error["loc"]:
        location += f"[{part}]" if isinstance(part, int) else (f".{part}" if location else part)
    message = error["msg"]
    if error["type"] == "extra_forbidden":
        message = "unknown setting (check its spelling and section)"
    return f"{location or 'file'}: {message}"
