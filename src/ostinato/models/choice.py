"""Which model a call uses: ids, presets, tiers, precedence, and the start-up default.

A model id is ``provider:model``; only the first colon separates them, so
``ollama:qwen3:8b`` is provider ``ollama``, model ``qwen3:8b``. Providers:

===================  ======================================  ===========================
provider             protocol                                key / base URL variables
===================  ======================================  ===========================
anthropic            Anthropic Messages                      ANTHROPIC_API_KEY / _BASE_URL
openai               OpenAI Responses                        OPENAI_API_KEY / _BASE_URL
openai-chat          OpenAI Chat Completions                 OPENAI_API_KEY / _BASE_URL
openai-compatible    Chat Completions at OSTINATO_BASE_URL   OSTINATO_API_KEY
ollama, vllm, ...    Chat Completions (see ``PRESETS``)      <NAME>_API_KEY / <NAME>_BASE_URL
offline              ostinato's built-in offline model       none
===================  ======================================  ===========================

A **tier** (``minuet``, ``allegro``, ``forte``) names a model class; ``Tiers`` maps tiers
to ids. Anywhere a model is chosen, a value with a colon is an id and one without is a tier.

Precedence (``select_model``): per request > per conversation > the agent's tier > the
deployment default. A per-request ``ModelOverride`` may carry the caller's own API key and
base URL. The key is never shown by ``repr`` (so never logged by accident); a base URL
given without a key is never sent a key from the environment, and a caller's base URL is
refused unless the deployment allows it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import anthropic
import httpx
import openai

from ostinato.errors import AuthenticationFailed, InvalidRequest
from ostinato.messages import JSON
from ostinato.models.base import Model
from ostinato.models.retry import DEFAULT_RETRY_POLICY, RetryPolicy

HEADER_MODEL_ID = "x-ostinato-model-id"
HEADER_MODEL_API_KEY = "x-ostinato-model-api-key"
HEADER_MODEL_BASE_URL = "x-ostinato-model-base-url"
ALLOW_BASE_URL_ENV = "OSTINATO_ALLOW_CALLER_BASE_URL"  # "1": callers may pick a base URL

TIER_NAMES = ("minuet", "allegro", "forte")
OLLAMA_DEFAULT_URL = "http://127.0.0.1:11434/v1"
_NO_KEY = "no-key"  # the SDKs insist on a key; local servers ignore it


@dataclass(frozen=True, slots=True)
class Preset:
    """An OpenAI-compatible server: where it lives and which variable holds its key."""

    name: str
    base_url: str
    key_env: str
    base_url_env: str | None = None
    needs_key: bool = True
    # ask for usage with ``stream_options``; Mistral refuses the field (and always sends it)
    stream_usage: bool = True


def _local(name: str, port: int, env: str) -> Preset:
    return Preset(name, f"http://127.0.0.1:{port}/v1", f"{env}_API_KEY", f"{env}_BASE_URL", False)


PRESETS: Mapping[str, Preset] = {
    p.name: p
    for p in (
        _local("ollama", 11434, "OLLAMA"),
        _local("vllm", 8000, "VLLM"),
        _local("llamacpp", 8080, "LLAMACPP"),
        _local("lmstudio", 1234, "LMSTUDIO"),
        Preset("openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
        Preset("groq", "https://api.groq.com/openai/v1", "GROQ_API_KEY"),
        Preset("deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
        Preset("mistral", "https://api.mistral.ai/v1", "MISTRAL_API_KEY", stream_usage=False),
        Preset("together", "https://api.together.xyz/v1", "TOGETHER_API_KEY"),
        Preset("xai", "https://api.x.ai/v1", "XAI_API_KEY"),
    )
}
PROVIDERS = frozenset({"anthropic", "openai", "openai-chat", "openai-compatible", "offline"})


def parse_model_id(model_id: str) -> tuple[str, str]:
    """``"provider:model"`` -> ``(provider, model)``; raises ``InvalidRequest``."""
    provider, sep, model = model_id.strip().partition(":")
    provider = provider.lower()
    if not sep or not provider or (not model and provider != "offline"):
        raise InvalidRequest(f"model id {model_id!r} is not of the form provider:model")
    if provider not in PROVIDERS and provider not in PRESETS:
        known = ", ".join(sorted(PROVIDERS | set(PRESETS)))
        raise InvalidRequest(f"unknown model provider {provider!r} (known: {known})")
    return provider, model


# --- building a model --------------------------------------------------------------------


def create_model(
    model_id: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    retry: RetryPolicy = DEFAULT_RETRY_POLICY,
    env: Mapping[str, str] | None = None,
) -> Model:
    """A ready ``Model`` for ``model_id``. Keys and base URLs not given come from ``env``
    (default: the process environment), except that an explicit ``base_url`` is never
    paired with a key from the environment."""
    env = os.environ if env is None else env
    provider, model = parse_model_id(model_id)
    if provider == "offline":
        from ostinato.models.offline import OfflineModel  # written elsewhere; loaded lazily

        return OfflineModel()
    if provider == "anthropic":
        from ostinato.models.anthropic import AnthropicModel

        key = _key(api_key, base_url, env, "ANTHROPIC_API_KEY", required=True)
        client = anthropic.AsyncAnthropic(
            api_key=key, base_url=base_url or env.get("ANTHROPIC_BASE_URL"), max_retries=0
        )
        return AnthropicModel(model, client, retry=retry)
    return _openai_model(provider, model, api_key, base_url, retry, env)


def _openai_model(
    provider: str,
    model: str,
    api_key: str | None,
    base_url: str | None,
    retry: RetryPolicy,
    env: Mapping[str, str],
) -> Model:
    from ostinato.models.openai_chat import OpenAIChatModel
    from ostinato.models.openai_responses import OpenAIResponsesModel

    name = f"{provider}:{model}"
    if provider in ("openai", "openai-chat"):
        key = _key(api_key, base_url, env, "OPENAI_API_KEY", required=True)
        client = _openai_client(key, base_url or env.get("OPENAI_BASE_URL"))
        if provider == "openai":
            return OpenAIResponsesModel(name, model, client, retry=retry)
        return OpenAIChatModel(name, model, client, retry=retry)
    stream_usage = True
    if provider == "openai-compatible":
        url = base_url or env.get("OSTINATO_BASE_URL")
        if not url:
            raise InvalidRequest("openai-compatible models need OSTINATO_BASE_URL or a base URL")
        key = _key(api_key, base_url, env, "OSTINATO_API_KEY", required=False)
    else:
        preset = PRESETS[provider]
        url = base_url or (preset.base_url_env and env.get(preset.base_url_env)) or preset.base_url
        key = _key(api_key, base_url, env, preset.key_env, required=preset.needs_key)
        stream_usage = preset.stream_usage
    return OpenAIChatModel(
        name,
        model,
        _openai_client(key, url),
        retry=retry,
        max_tokens_field="max_tokens",
        include_usage=stream_usage,
    )


def _openai_client(api_key: str, base_url: str | None) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key=api_key, base_url=base_url or None, max_retries=0)


def _key(
    given: str | None, base_url: str | None, env: Mapping[str, str], var: str, *, required: bool
) -> str:
    if given:
        return given
    if base_url is None and env.get(var):
        return env[var]
    if required and base_url is None:
        raise AuthenticationFailed(f"{var} is not set, and no API key was given")
    return _NO_KEY


# --- tiers and precedence ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tiers:
    """Tier name -> model id. ``OSTINATO_TIER_<NAME>`` variables override the defaults."""

    mapping: Mapping[str, str]

    def resolve(self, tier: str) -> str:
        model_id = self.mapping.get(tier.lower())
        if model_id is None:
            raise InvalidRequest(f"unknown model tier {tier!r} (known: {', '.join(self.mapping)})")
        return model_id

    @classmethod
    def for_default(cls, default_id: str, env: Mapping[str, str] | None = None) -> Tiers:
        """Sensible tiers for a deployment whose default model is ``default_id``."""
        env = os.environ if env is None else env
        provider = default_id.partition(":")[0]
        mapping = dict(_DEFAULT_TIERS.get(provider) or dict.fromkeys(TIER_NAMES, default_id))
        for name in TIER_NAMES:
            if value := env.get(f"OSTINATO_TIER_{name.upper()}"):
                mapping[name] = value
        return cls(mapping)


_DEFAULT_TIERS: Mapping[str, Mapping[str, str]] = {
    "anthropic": {
        "minuet": "anthropic:claude-haiku-4-5",
        "allegro": "anthropic:claude-sonnet-4-5",
        "forte": "anthropic:claude-opus-4-5",
    },
    "openai": {
        "minuet": "openai:gpt-4.1-mini",
        "allegro": "openai:gpt-4.1",
        "forte": "openai:gpt-5",
    },
}


@dataclass(frozen=True, slots=True)
class ModelOverride:
    """A caller's per-request choice: a model id or tier, and optionally its own key/URL."""

    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> ModelOverride | None:
        """Read the ``x-ostinato-model-*`` headers (``None`` when none is present)."""
        override = cls(
            model=headers.get(HEADER_MODEL_ID) or None,
            api_key=headers.get(HEADER_MODEL_API_KEY) or None,
            base_url=headers.get(HEADER_MODEL_BASE_URL) or None,
        )
        return None if override == cls() else override


@dataclass(frozen=True, slots=True)
class ModelSelection:
    """The chosen model and why. ``create()`` builds it; the key is never in ``repr``."""

    model_id: str
    source: str  # "request" | "conversation" | "agent tier" | "default"
    tier: str | None = None
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None

    def create(self, *, retry: RetryPolicy = DEFAULT_RETRY_POLICY) -> Model:
        return create_model(
            self.model_id, api_key=self.api_key, base_url=self.base_url, retry=retry
        )


def select_model(
    *,
    default: str,
    tiers: Tiers,
    request: ModelOverride | None = None,
    conversation: str | None = None,
    agent_tier: str | None = None,
    allow_base_url: bool = False,
) -> ModelSelection:
    """Apply the precedence: per request > per conversation > agent tier > default.

    Each of ``request.model``, ``conversation``, ``agent_tier`` and ``default`` may be a
    model id or a tier name. A request's key and base URL apply to whichever model wins.
    A caller's base URL makes the server connect wherever the caller says, so it is
    refused unless the deployment allows it (``allow_base_url``; the server maps
    ``OSTINATO_ALLOW_CALLER_BASE_URL=1`` to it).
    """
    if request and request.base_url and not allow_base_url:
        raise InvalidRequest(
            f"{HEADER_MODEL_BASE_URL} is not allowed on this server "
            f"(set {ALLOW_BASE_URL_ENV}=1 to allow it)"
        )
    choices = (
        ("request", request.model if request else None),
        ("conversation", conversation),
        ("agent tier", agent_tier),
        ("default", default),
    )
    source, value = next((s, v) for s, v in choices if v)
    tier = None if ":" in value else value.lower()
    model_id = value if tier is None else tiers.resolve(tier)
    parse_model_id(model_id)  # fail early, with the caller's words
    return ModelSelection(
        model_id,
        source,
        tier,
        api_key=request.api_key if request else None,
        base_url=request.base_url if request else None,
    )


# --- the start-up default ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DefaultModel:
    """The deployment default and how it was found; ``str()`` is what ``serve`` prints."""

    model_id: str
    reason: str

    def __str__(self) -> str:
        return f"{self.model_id} ({self.reason})"

    def to_json(self) -> JSON:
        return {"id": self.model_id, "reason": self.reason}


async def autodetect_default(
    env: Mapping[str, str] | None = None, *, probe_timeout: float = 0.5
) -> DefaultModel:
    """The start-up order: OSTINATO_MODEL, ANTHROPIC_API_KEY, OPENAI_API_KEY, a server
    at OSTINATO_BASE_URL, Ollama at its default address, the offline model."""
    env = os.environ if env is None else env
    if model_id := env.get("OSTINATO_MODEL"):
        parse_model_id(model_id)
        return DefaultModel(model_id, "set by OSTINATO_MODEL")
    if env.get("ANTHROPIC_API_KEY"):
        return DefaultModel("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY is set")
    if env.get("OPENAI_API_KEY"):
        if url := env.get("OPENAI_BASE_URL"):
            model = await first_listed_model(url, env["OPENAI_API_KEY"], probe_timeout)
            reason = f"OPENAI_API_KEY is set; Chat Completions at OPENAI_BASE_URL {url}"
            return DefaultModel(f"openai-chat:{model or 'gpt-4.1-mini'}", reason)
        return DefaultModel("openai:gpt-4.1-mini", "OPENAI_API_KEY is set")
    if url := env.get("OSTINATO_BASE_URL"):
        key = env.get("OSTINATO_API_KEY") or _NO_KEY
        if model := await first_listed_model(url, key, probe_timeout):
            return DefaultModel(f"openai-compatible:{model}", f"a server answers at {url}")
    ollama_url = env.get("OLLAMA_BASE_URL") or OLLAMA_DEFAULT_URL
    if model := await first_listed_model(ollama_url, _NO_KEY, probe_timeout):
        return DefaultModel(f"ollama:{model}", f"Ollama answers at {ollama_url}")
    return DefaultModel("offline:ostinato", "no provider is configured and no local server answers")


async def first_listed_model(base_url: str, api_key: str, wait: float) -> str | None:
    """The first model an OpenAI-compatible server lists at ``GET {base_url}/models``,
    or ``None`` if it does not answer in time or lists none."""
    url = base_url.rstrip("/") + "/models"
    try:
        async with httpx.AsyncClient(timeout=wait) as client:
            response = await client.get(url, headers={"Authorization": f"Bearer {api_key}"})
            response.raise_for_status()
            data = response.json().get("data")
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        model = data[0].get("id")
        return model if isinstance(model, str) and model else None
    return None


def describe_models(default: DefaultModel, tiers: Tiers) -> JSON:
    """The body of ``GET /v1/models``: the default and each tier, in OpenAI's list shape."""
    entries: list[JSON] = [
        {
            "id": default.model_id,
            "object": "model",
            "owned_by": default.model_id.split(":")[0],
            "ostinato": {"default": True, "reason": default.reason},
        }
    ]
    for tier, model_id in tiers.mapping.items():
        entries.append(
            {
                "id": model_id,
                "object": "model",
                "owned_by": model_id.split(":")[0],
                "ostinato": {"tier": tier},
            }
        )
    return {"object": "list", "data": entries}
