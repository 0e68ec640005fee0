"""Which model a call uses: tiers, precedence, and the start-up default.

Model ids (``provider:model``), the presets, ``ProviderSettings`` and ``create_model``
live in ``ostinato.models.providers`` and are re-exported here.

A **tier** (``minuet``, ``allegro``, ``forte``) names a model class; ``Tiers`` maps tiers
to ids. Anywhere a model is chosen, a value with a colon is an id and one without is a tier.

Precedence (``select_model``): per request > per conversation > the agent's tier > the
deployment default. A per-request ``ModelOverride`` may carry the caller's own API key and
base URL. The key is never shown by ``repr`` (so never logged by accident); a base URL
given without a key is never sent a key from the environment, and a caller's base URL is
refused unless the deployment allows it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ostinato.errors import InvalidRequest
from ostinato.messages import JSON
from ostinato.models.base import Model
from ostinato.models.providers import (
    NO_KEY,
    NO_SETTINGS,
    PRESETS,
    Preset,
    ProviderSettings,
    create_model,
    parse_model_id,
)
from ostinato.models.retry import DEFAULT_RETRY_POLICY, RetryPolicy

__all__ = [
    "ALLOW_BASE_URL_ENV",
    "HEADER_MODEL_API_KEY",
    "HEADER_MODEL_BASE_URL",
    "HEADER_MODEL_ID",
    "PRESETS",
    "TIER_NAMES",
    "DefaultModel",
    "ModelOverride",
    "ModelSelection",
    "Preset",
    "ProviderSettings",
    "Tiers",
    "autodetect_default",
    "create_model",
    "describe_models",
    "first_listed_model",
    "parse_model_id",
    "select_model",
]

HEADER_MODEL_ID = "x-ostinato-model-id"
HEADER_MODEL_API_KEY = "x-ostinato-model-api-key"
HEADER_MODEL_BASE_URL = "x-ostinato-model-base-url"
ALLOW_BASE_URL_ENV = "OSTINATO_ALLOW_CALLER_BASE_URL"  # "1": callers may pick a base URL

TIER_NAMES = ("minuet", "allegro", "forte")
OLLAMA_DEFAULT_URL = "http://127.0.0.1:11434/v1"


# --- tiers and precedence ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tiers:
    """Tier name -> model id."""

    mapping: Mapping[str, str]

    def resolve(self, tier: str) -> str:
        model_id = self.mapping.get(tier.lower())
        if model_id is None:
            raise InvalidRequest(f"unknown model tier {tier!r} (known: {', '.join(self.mapping)})")
        return model_id

    @classmethod
    def for_default(cls, default_id: str, configured: Mapping[str, str] | None = None) -> Tiers:
        """Sensible tiers for a deployment whose default model is ``default_id``, with the
        ``configured`` ones (``models.tiers``) over them."""
        provider = default_id.partition(":")[0]
        mapping = dict(_DEFAULT_TIERS.get(provider) or dict.fromkeys(TIER_NAMES, default_id))
        mapping.update({name.lower(): value for name, value in (configured or {}).items()})
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

    def create(
        self, *, retry: RetryPolicy = DEFAULT_RETRY_POLICY, settings: ProviderSettings = NO_SETTINGS
    ) -> Model:
        return create_model(
            self.model_id,
            api_key=self.api_key,
            base_url=self.base_url,
            retry=retry,
            settings=settings,
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
    refused unless the deployment allows it (``allow_base_url``: the setting
    ``models.allow_caller_base_url``, ``OSTINATO_ALLOW_CALLER_BASE_URL=1``).
    """
    if request and request.base_url and not allow_base_url:
        raise InvalidRequest(
            f"{HEADER_MODEL_BASE_URL} is not allowed on this server "
            f"(the setting models.allow_caller_base_url, {ALLOW_BASE_URL_ENV}=1, allows it)"
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
    # the configured model server's address when it did not answer at start-up (it is
    # still the default: turns fail, saying so, until it answers)
    unreachable: str | None = None
    # the context window the model server reported for it (``reported_window``), if any
    window: int | None = None

    def __str__(self) -> str:
        if self.unreachable:
            return f"{self.model_id} (UNREACHABLE: {self.reason})"
        return f"{self.model_id} ({self.reason})"

    def to_json(self) -> JSON:
        return {"id": self.model_id, "reason": self.reason}


CONFIGURED_PROBES_S = (1.0, 2.0, 4.0)  # a configured server's start-up probe: its attempts
UNNAMED = "default"  # the model asked of a configured server that listed none at start-up


async def autodetect_default(
    env: Mapping[str, str] | None = None,
    *,
    settings: ProviderSettings = NO_SETTINGS,
    probe_timeout: float = 0.5,
) -> DefaultModel:
    """The default when none is configured (``models.default``), in this order:
    ANTHROPIC_API_KEY, OPENAI_API_KEY, a server at ``settings.base_url``
    (``OSTINATO_BASE_URL``), Ollama at its default address, the offline model."""
    env = os.environ if env is None else env
    if env.get("ANTHROPIC_API_KEY"):
        return DefaultModel("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY is set")
    if env.get("OPENAI_API_KEY"):
        if url := env.get("OPENAI_BASE_URL"):
            model = await first_listed_model(url, env["OPENAI_API_KEY"], probe_timeout)
            reason = f"OPENAI_API_KEY is set; Chat Completions at OPENAI_BASE_URL {url}"
            return DefaultModel(f"openai-chat:{model or 'gpt-4.1-mini'}", reason)
        return DefaultModel("openai:gpt-4.1-mini", "OPENAI_API_KEY is set")
    if url := settings.base_url:  # configured: used whether it answers now or not
        return await configured_server(url, settings.api_key or NO_KEY, CONFIGURED_PROBES_S)
    ollama_url = env.get("OLLAMA_BASE_URL") or OLLAMA_DEFAULT_URL
    if model := await first_listed_model(ollama_url, NO_KEY, probe_timeout):
        return DefaultModel(f"ollama:{model}", f"Ollama answers at {ollama_url}")
    return DefaultModel("offline:ostinato", "no provider is configured and no local server answers")


async def configured_server(url: str, key: str, waits: Sequence[float]) -> DefaultModel:
    """The default on the configured server (``OSTINATO_BASE_URL``): its first listed
    model, asked a few times (a busy machine answers late); when it never answers, still
    that server (never the offline model in its place), marked unreachable."""
    for i, wait in enumerate(waits):
        if i:
            await asyncio.sleep(0.5)
        if (entry := await first_listed(url, key, wait)) is not None:
            model_id, reason = f"openai-compatible:{entry['id']}", f"a server answers at {url}"
            return DefaultModel(model_id, reason, window=reported_window(entry))
    reason = (
        f"OSTINATO_BASE_URL is set, and the server at {url} did not answer: turns fail, "
        f"saying so, until it does; OSTINATO_MODEL=openai-compatible:NAME names its model"
    )
    return DefaultModel(f"openai-compatible:{UNNAMED}", reason, unreachable=url)


async def first_listed_model(base_url: str, api_key: str, wait: float) -> str | None:
    """The first model an OpenAI-compatible server lists at ``GET {base_url}/models``,
    or ``None`` if it does not answer in time or lists none."""
    entry = await first_listed(base_url, api_key, wait)
    return None if entry is None else str(entry["id"])


def reported_window(entry: Mapping[str, Any]) -> int | None:
    """The context window a model listing reports, in the fields local servers use:
    vLLM's ``max_model_len``, llama.cpp's ``meta.n_ctx_train``, ``context_length``
    (LM Studio, OpenRouter)."""
    meta = entry.get("meta")
    found = [
        entry.get("max_model_len"),
        meta.get("n_ctx_train") if isinstance(meta, dict) else None,
        entry.get("context_length"),
    ]
    return next(
        (n for n in found if isinstance(n, int) and not isinstance(n, bool) and n > 0), None
    )


async def first_listed(base_url: str, api_key: str, wait: float) -> dict[str, Any] | None:
    """The first entry (with a string ``id``) of ``GET {base_url}/models``, or ``None``."""
    import httpx

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
        return data[0] if isinstance(model, str) and model else None
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
