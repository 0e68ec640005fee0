"""Providers: model ids, the presets for OpenAI-compatible servers, and ``create_model``.

A model id is ``provider:model``; only the first colon separates them, so
``ollama:qwen3:8b`` is provider ``ollama``, model ``qwen3:8b``.

===================  ======================================  ===========================
provider             protocol                                key / base URL variables
===================  ======================================  ===========================
anthropic            Anthropic Messages                      ANTHROPIC_API_KEY / _BASE_URL
openai               OpenAI Responses                        OPENAI_API_KEY / _BASE_URL
openai-chat          OpenAI Chat Completions                 OPENAI_API_KEY / _BASE_URL
openai-compatible    Chat Completions at ``models.base_url``   ``models.api_key``
ollama, vllm, ...    Chat Completions (see ``PRESETS``)      <NAME>_API_KEY / <NAME>_BASE_URL
offline              ostinato's built-in offline model       none
===================  ======================================  ===========================

SDK clients configured from the environment are shared per event loop (each holds a
connection pool, and a new one per call would pay a new TLS handshake), on the SDK's
aiohttp transport, and their models' calls go through a lean streamed call beside them
(``models.sse_http``, one ``Channel`` per client and provider: the client's request,
sent on aiohttp directly); clients for a caller's own key or base URL are made for that
call alone, on the SDK's own path, so no caller's key outlives its request. The SDKs
are imported when a model of theirs is first made, so a deployment that uses neither
does not pay for importing them.

``ProviderSettings`` carries ostinato's own provider settings (the ``[models]`` section:
``OSTINATO_BASE_URL``, ``OSTINATO_THINKING_BUDGET`` ...), given by whoever builds the
models; the SDKs' own variables (``ANTHROPIC_API_KEY``, ``OPENAI_BASE_URL`` ...) are read
from ``env`` where a client is made. The deployment's keys (from ``env`` or the settings)
are registered with ``ostinato.redaction``, so no error can show them; a caller's key is
redacted by its model alone.

Every client's read timeout is the idle timeout (``ProviderSettings.idle_timeout``, default
``DEFAULT_IDLE_TIMEOUT`` seconds): a provider that sends no byte for that long, before its
first event or between two, fails the attempt as ``StreamIdle``, which is retried
(``ostinato.models.failures``).
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from ostinato.errors import AuthenticationFailed, InvalidRequest
from ostinato.models.base import Model
from ostinato.models.pool import DEFAULT_MAX_REQUESTS, pooled
from ostinato.models.retry import DEFAULT_RETRY_POLICY, RetryPolicy
from ostinato.redaction import register_secret

if TYPE_CHECKING:
    import anthropic
    import httpx2
    import openai

    from ostinato.models.sse_http import Channel

NO_KEY = "no-key"  # the SDKs insist on a key; local servers ignore it
DEFAULT_IDLE_TIMEOUT = 30.0  # seconds without a byte from the provider
CONNECT_TIMEOUT = 10.0  # seconds to open a connection (at most the idle timeout)
_Client = TypeVar("_Client", "openai.AsyncOpenAI", "anthropic.AsyncAnthropic")
_T = TypeVar("_T")
_SHARED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, ...], object]] = (
    weakref.WeakKeyDictionary()
)


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
    # send thinking back as ``reasoning_content``: DeepSeek requires it during tool use,
    # stricter servers refuse the unknown field
    send_reasoning: bool = False
    # "file" content parts: OpenRouter reads them; llama.cpp, Ollama and vLLM refuse them,
    # so their files go as a note saying the model cannot see them
    file_parts: bool = False
    # Mistral takes only tool call ids of nine letters and digits, and refuses an
    # assistant message with neither text nor tool calls
    mistral_rules: bool = False


def _local(name: str, port: int, env: str) -> Preset:
    return Preset(name, f"http://127.0.0.1:{port}/v1", f"{env}_API_KEY", f"{env}_BASE_URL", False)


PRESETS: Mapping[str, Preset] = {
    p.name: p
    for p in (
        _local("ollama", 11434, "OLLAMA"),
        _local("vllm", 8000, "VLLM"),
        _local("llamacpp", 8080, "LLAMACPP"),
        _local("lmstudio", 1234, "LMSTUDIO"),
        Preset("openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", file_parts=True),
        Preset("groq", "https://api.groq.com/openai/v1", "GROQ_API_KEY"),
        Preset("deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", send_reasoning=True),
        Preset(
            "mistral",
            "https://api.mistral.ai/v1",
            "MISTRAL_API_KEY",
            stream_usage=False,
            mistral_rules=True,
        ),
        Preset("together", "https://api.together.xyz/v1", "TOGETHER_API_KEY"),
        Preset("xai", "https://api.x.ai/v1", "XAI_API_KEY"),
    )
}
LOCAL_PROVIDERS = frozenset(
    {"ollama", "vllm", "llamacpp", "lmstudio", "openai-compatible", "offline"}
)
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


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    """ostinato's own provider settings: the OpenAI-compatible server for
    ``openai-compatible:`` ids (``base_url``, ``api_key``), Anthropic's extended thinking
    budget in tokens, the Responses API's reasoning effort, the idle timeout (seconds the
    provider may send nothing before the attempt fails and is retried), and how many
    calls one provider endpoint takes at once (``ostinato.models.pool``; 0: no bound)."""

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    thinking_budget: int | None = None
    reasoning_effort: str | None = None
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    max_requests: int = DEFAULT_MAX_REQUESTS  # calls at once per endpoint (``models.pool``)


NO_SETTINGS = ProviderSettings()


def is_local(model_id: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether ``model_id`` runs on a server of the operator's own: a local preset, an
    OpenAI-compatible server, the offline model, or OpenAI ids sent to ``OPENAI_BASE_URL``."""
    env = os.environ if env is None else env
    provider = model_id.partition(":")[0].lower()
    if provider in LOCAL_PROVIDERS:
        return True
    return provider in ("openai", "openai-chat") and bool(env.get("OPENAI_BASE_URL"))


# --- building a model --------------------------------------------------------------------


def create_model(
    model_id: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    retry: RetryPolicy = DEFAULT_RETRY_POLICY,
    env: Mapping[str, str] | None = None,
    settings: ProviderSettings = NO_SETTINGS,
) -> Model:
    """A ready ``Model`` for ``model_id``. The SDKs' keys and base URLs not given come
    from ``env`` (default: the process environment), except that an explicit ``base_url``
    is never paired with a key from the environment. ``settings`` gives the
    ``openai-compatible`` server, the thinking and reasoning options, and the bound on
    one endpoint's calls at once (every model of one provider and base URL shares it)."""
    env = os.environ if env is None else env
    provider, model = parse_model_id(model_id)
    if provider == "offline":
        from ostinato.models.offline import OfflineModel  # written elsewhere; loaded lazily

        return OfflineModel()
    made = _provider_model(provider, model, api_key, base_url, retry, env, settings)
    return pooled(made, f"{provider} {base_url or ''}", settings.max_requests)


def _provider_model(
    provider: str,
    model: str,
    api_key: str | None,
    base_url: str | None,
    retry: RetryPolicy,
    env: Mapping[str, str],
    settings: ProviderSettings,
) -> Model:
    if provider == "anthropic":
        import anthropic

        from ostinato.models.anthropic import AnthropicModel

        key = _key(api_key, base_url, env, "ANTHROPIC_API_KEY", required=True)
        url = base_url or env.get("ANTHROPIC_BASE_URL")
        shared = api_key is None and base_url is None
        client = _client(anthropic.AsyncAnthropic, key, url, settings.idle_timeout, shared)
        budget = settings.thinking_budget
        channel = _channel(provider, client, shared)
        return AnthropicModel(model, client, retry=retry, thinking_budget=budget, channel=channel)
    return _openai_model(provider, model, api_key, base_url, retry, env, settings)


def _openai_model(
    provider: str,
    model: str,
    api_key: str | None,
    base_url: str | None,
    retry: RetryPolicy,
    env: Mapping[str, str],
    settings: ProviderSettings,
) -> Model:
    import openai

    from ostinato.models.openai_chat import OpenAIChatModel, WireRules
    from ostinato.models.openai_responses import OpenAIResponsesModel

    name = f"{provider}:{model}"
    shared = api_key is None and base_url is None
    idle = settings.idle_timeout
    if provider in ("openai", "openai-chat"):
        key = _key(api_key, base_url, env, "OPENAI_API_KEY", required=True)
        url = base_url or env.get("OPENAI_BASE_URL")
        client = _client(openai.AsyncOpenAI, key, url, idle, shared)
        channel = _channel(provider, client, shared)
        if provider == "openai":
            effort = settings.reasoning_effort
            return OpenAIResponsesModel(
                name, model, client, retry=retry, reasoning_effort=effort, channel=channel
            )
        return OpenAIChatModel(name, model, client, retry=retry, channel=channel)
    stream_usage, rules = True, WireRules(file_parts=False)  # what every server accepts
    if provider == "openai-compatible":
        url = base_url or settings.base_url
        if not url:
            raise InvalidRequest(
                "openai-compatible models need models.base_url (OSTINATO_BASE_URL) or a base URL"
            )
        if base_url is None:
            register_secret(settings.api_key)  # the deployment's key: no error may show it
        key = api_key or (settings.api_key if base_url is None else None) or NO_KEY
    else:
        preset = PRESETS[provider]
        url = base_url or (preset.base_url_env and env.get(preset.base_url_env)) or preset.base_url
        key = _key(api_key, base_url, env, preset.key_env, required=preset.needs_key)
        stream_usage = preset.stream_usage
        rules = WireRules(
            send_reasoning=preset.send_reasoning,
            file_parts=preset.file_parts,
            short_tool_ids=preset.mistral_rules,
            nonempty_replies=preset.mistral_rules,
        )
    client = _client(openai.AsyncOpenAI, key, url, idle, shared)
    return OpenAIChatModel(
        name,
        model,
        client,
        retry=retry,
        max_tokens_field="max_tokens",
        include_usage=stream_usage,
        rules=rules,
        channel=_channel(provider, client, shared),
    )


def _client(
    kind: type[_Client], api_key: str, base_url: str | None, idle: float, shared: bool
) -> _Client:
    """An SDK client with the SDK's own retries off (``ostinato.models.retry`` retries) and
    the idle timeout as its read timeout."""

    def make(aiohttp: bool = False) -> _Client:
        import httpx2  # the SDKs' HTTP client, imported with them

        timeout = httpx2.Timeout(idle, connect=min(idle, CONNECT_TIMEOUT))
        http = _aiohttp_client(kind, timeout) if aiohttp else None
        return kind(
            api_key=api_key,
            base_url=base_url or None,
            max_retries=0,
            timeout=timeout,
            http_client=http,
        )

    key = (kind.__name__, api_key, base_url or "", str(idle))
    client = _shared(key, lambda: make(aiohttp=True), kind) if shared else None
    return make() if client is None else client


def _channel(
    provider: str, client: openai.AsyncOpenAI | anthropic.AsyncAnthropic, shared: bool
) -> Channel | None:
    """The lean path (``models.sse_http``) to a shared client's server, shared with it (one
    aiohttp session, one pool of connections); ``None`` for a caller's own client, which
    keeps the SDK's ``post`` (a session would outlive the call)."""
    if not shared:
        return None
    from ostinato.models.channels import channel_for
    from ostinato.models.failures import Endpoint
    from ostinato.models.sse_http import Channel

    def make() -> Channel:
        return channel_for(client, Endpoint.of(provider, client))

    return _shared(("channel", provider, str(id(client))), make, Channel)


def _shared(key: tuple[str, ...], make: Callable[[], _T], kind: type[_T]) -> _T | None:
    """The running event loop's one ``make()`` for ``key`` (``None`` outside a loop)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    made = _SHARED.setdefault(loop, {})
    value = made.get(key)
    if not isinstance(value, kind):
        value = made[key] = make()
    return value


def _aiohttp_client(kind: type[_Client], timeout: httpx2.Timeout) -> httpx2.AsyncClient | None:
    """The SDK's own ``httpx2`` client on its aiohttp transport (the SDKs' ``aiohttp``
    extra): its connection pool does not walk every pooled connection on each request and
    each close, so a call's cost does not grow with the streams open (docs/performance.md).
    The SDK's request building, errors and SSE decoding are the same on either transport.
    ``None`` (the SDK's default transport) in an environment installed without aiohttp."""
    try:
        import aiohttp  # noqa: F401  (a dependency of ostinato's; an old install may lack it)
    except ImportError:
        return None
    if kind.__module__.startswith("anthropic"):
        import anthropic

        return anthropic.DefaultAioHttpClient(timeout=timeout)
    import openai

    return openai.DefaultAioHttpClient(timeout=timeout)


def _key(
    given: str | None, base_url: str | None, env: Mapping[str, str], var: str, *, required: bool
) -> str:
    if given:
        return given
    if base_url is None and env.get(var):
        register_secret(env[var])  # the deployment's key: no error may show it
        return env[var]
    if required and base_url is None:
        raise AuthenticationFailed(f"{var} is not set, and no API key was given")
    return NO_KEY
