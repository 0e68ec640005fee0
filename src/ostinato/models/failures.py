"""What a provider's failure means, said without its secrets and with the server's name.

``Endpoint`` is the server a model talks to as an error names it (``ollama at
127.0.0.1:11434``, ``openai-compatible at gpu-box:8000``, ``anthropic at
api.anthropic.com``) and the key its client sends, which no error may repeat. Every error
text an adapter makes goes through ``Endpoint.say``: the label first, then the provider's
message with every secret redacted (``ostinato.redaction``).

``classify_failure`` maps what a provider said (HTTP status, error type and code, message)
onto the error tree in ``ostinato.errors``; each adapter pulls those fields out of its SDK's
exception and calls it. The provider's own code is kept in the text (``[invalid_api_key]``),
since it often says more than ours.

Timeouts: the SDK clients' read timeout is the idle timeout (``providers.create_model``
sets it; the lean path, ``models.sse_http``, keeps the same timeout itself), so a
provider that sends no byte for that long (no headers, no event, not even a keep-alive
comment) ends the attempt with ``StreamIdle``, which is retried. A connection that
cannot be made in time is ``ProviderUnavailable``, retried too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from time import time
from typing import Any

from ostinato.errors import (
    AuthenticationFailed,
    ContextTooLong,
    ModelError,
    Overloaded,
    ProviderUnavailable,
    QuotaExhausted,
    RateLimited,
    StreamIdle,
)
from ostinato.redaction import redact


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A model's server as errors name it, and the key no error may show."""

    label: str
    api_key: str | None = field(default=None, repr=False)
    idle_timeout: float | None = None  # the client's read timeout, for the error text

    @classmethod
    def of(cls, provider: str, client: Any) -> Endpoint:
        """The endpoint of an SDK client (``openai`` or ``anthropic``): its host and port,
        never its user info or path, its key, and its read timeout."""
        url = getattr(client, "base_url", None)
        host = getattr(url, "host", "") or ""
        port = getattr(url, "port", None)
        where = f"{host}:{port}" if host and port else host
        import httpx2  # the client's own library, already loaded

        timeout = getattr(client, "timeout", None)
        idle = timeout.read if isinstance(timeout, httpx2.Timeout) else timeout
        return cls(
            f"{provider} at {where}" if where else provider,
            getattr(client, "api_key", None),
            float(idle) if isinstance(idle, int | float) else None,
        )

    def say(self, message: str) -> str:
        """``label: message``, with every secret in ``message`` redacted."""
        return f"{self.label}: {redact(message, (self.api_key,))}"


# --- classification ----------------------------------------------------------------------

_QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached", "billing_error"})
_QUOTA_WORDS = ("credit balance", "spend limit", "usage limit", "exceeded your current quota")
_CONTEXT_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})
_CONTEXT_WORDS = (
    "prompt is too long",
    "context length",
    "context_length_exceeded",
    "maximum context",
    "context window",
    "too many tokens",
)
_RATE_CODES = frozenset({"rate_limit_exceeded", "rate_limit_error", "rate_limited"})
_OVERLOAD_CODES = frozenset({"overloaded_error", "overloaded", "server_overloaded"})
_SERVER_CODES = frozenset({"server_error", "api_error", "internal_error", "service_unavailable"})
_AUTH_CODES = frozenset(
    {"authentication_error", "permission_error", "invalid_api_key", "permission_denied"}
)


def classify_failure(
    endpoint: Endpoint,
    *,
    status: int | None,
    kind: str | None,
    message: str,
    retry_after: float | None = None,
) -> ModelError:
    """The typed error for one provider failure.

    ``status`` is the HTTP status (``None`` for an error event inside a stream),
    ``kind`` the error's ``type`` or ``code`` from its body, ``message`` its text.
    """
    code = (kind or "").lower()
    lowered = message.lower()
    said = f"[{kind}] {message}" if kind and kind not in message else message
    text = endpoint.say(said or f"HTTP {status}")
    if code in _QUOTA_CODES or status == 402 or any(w in lowered for w in _QUOTA_WORDS):
        return QuotaExhausted(text)
    if code in _CONTEXT_CODES or status == 413 or any(w in lowered for w in _CONTEXT_WORDS):
        return ContextTooLong(text)
    if code in _AUTH_CODES or status in (401, 403):
        return AuthenticationFailed(text)
    if code in _RATE_CODES or status == 429:
        return RateLimited(text, retry_after=retry_after)
    if code in _OVERLOAD_CODES or status == 529:
        return Overloaded(text, retry_after=retry_after)
    if code in _SERVER_CODES or (status is not None and status >= 500) or status == 408:
        return ProviderUnavailable(text, retry_after=retry_after)
    return ModelError(text)


def connection_failure(endpoint: Endpoint, exc: BaseException) -> ModelError:
    """A connection that failed, dropped or timed out (an SDK's connection error, or the
    transport error some SDKs let escape mid-stream). Every kind is worth a retry."""
    import httpx2  # loaded with the SDK that raised

    cause = exc.__cause__ if not isinstance(exc, httpx2.HTTPError) else exc
    if cause is not None and _dropped(cause):
        return link_failure(endpoint, str(cause.__cause__))
    if isinstance(cause, httpx2.ConnectTimeout | httpx2.PoolTimeout):
        return link_failure(endpoint, None)
    if isinstance(cause, httpx2.TimeoutException) or _is_sdk_timeout(exc):
        return idle_failure(endpoint)
    return link_failure(endpoint, str(exc) or type(exc).__name__)


def idle_failure(endpoint: Endpoint) -> StreamIdle:
    """The provider sent nothing for the idle timeout (retried)."""
    idle = f" for {endpoint.idle_timeout:g} s" if endpoint.idle_timeout else ""
    return StreamIdle(endpoint.say(f"sent nothing{idle} (the idle timeout)"))


def link_failure(endpoint: Endpoint, detail: str | None) -> ProviderUnavailable:
    """A connection that failed or dropped (``detail`` says how), or that could not be
    made in time (``None``). Retried."""
    if detail is None:
        return ProviderUnavailable(endpoint.say("could not connect in time"))
    return ProviderUnavailable(endpoint.say(f"connection failed ({detail})"))


def _dropped(cause: BaseException) -> bool:
    """A connection the server closed, as the SDKs' aiohttp transport reports it: as a
    ``ConnectTimeout`` made from an aiohttp error that is no timeout."""
    import httpx2

    inner = cause.__cause__
    return (
        isinstance(cause, httpx2.ConnectTimeout)
        and inner is not None
        and not isinstance(inner, TimeoutError)
    )


def _is_sdk_timeout(exc: BaseException) -> bool:
    return type(exc).__name__ == "APITimeoutError"  # openai's and anthropic's alike


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if not headers:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(raw).timestamp() - time())
    except (TypeError, ValueError):
        return None
