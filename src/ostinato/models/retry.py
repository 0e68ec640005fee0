"""Attempts, retries, and the classification of provider failures.

``run_attempt`` is one model call for any adapter: open the SDK's stream, fold its events
through the adapter's pure decoder, always close the HTTP response (also when the caller
closes the generator or is cancelled, so the provider stops generating), and turn every
failure into an error from ``ostinato.errors``.

Every adapter runs its attempts through ``with_retries``: a failed attempt that raised a
``RetryableModelError`` (429, overloaded, 5xx, a dropped connection) is retried after a
pause, and the pause is announced with a ``Retrying`` event first, so surfaces can show it
and the ``MessageBuilder`` can drop the partial reply. The SDKs' own retries are switched
off (``max_retries=0``) so these are the only ones.

The pause is exponential backoff with "full jitter" (a uniform draw between zero and the
capped exponential), the scheme described in the AWS Architecture Blog post "Exponential
Backoff And Jitter" (2015). A provider's ``retry-after`` wins over the computed pause; one
asking for more than ``max_retry_after`` seconds ends the call instead, since nothing in
ostinato waits that long.

``classify_failure`` maps what a provider said (HTTP status, error type and code, message)
onto the error tree in ``ostinato.errors``; each adapter pulls those fields out of its SDK's
exception and calls it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from time import time
from typing import Any, Protocol

import httpx2

from ostinato.errors import (
    AuthenticationFailed,
    ContextTooLong,
    ModelError,
    ModelTimeout,
    Overloaded,
    ProviderUnavailable,
    QuotaExhausted,
    RateLimited,
    RetryableModelError,
)
from ostinato.models.base import ModelEvent, Retrying


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a model call is retried."""

    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """The pause before retry number ``retry`` (1-based)."""
        if retry_after is not None:
            return max(0.0, retry_after)
        ceiling = min(self.max_delay, self.base_delay * 2 ** (retry - 1))
        return random.uniform(0.0, ceiling)


DEFAULT_RETRY_POLICY = RetryPolicy()


async def with_retries(
    attempt: Callable[[], AsyncGenerator[ModelEvent, None]],
    policy: RetryPolicy = DEFAULT_RETRY_POLICY,
) -> AsyncGenerator[ModelEvent, None]:
    """Run ``attempt()`` and pass its events through, retrying retryable failures.

    Each attempt's generator is closed before the next starts, and closing this generator
    closes the running attempt (which closes its HTTP response).
    """
    retry = 0
    while True:
        events = attempt()
        try:
            async with aclosing(events):
                async for event in events:
                    yield event
            return
        except RetryableModelError as exc:
            retry += 1
            too_long = exc.retry_after is not None and exc.retry_after > policy.max_retry_after
            if retry > policy.max_retries or too_long:
                raise
            delay = policy.delay(retry, exc.retry_after)
            error = f"{exc.code}: {exc.message}"
        yield Retrying(attempt=retry, delay=delay, error=error)
        await asyncio.sleep(delay)


class Decoder(Protocol):
    """An adapter's pure wire -> events folding (no I/O)."""

    def feed(self, event: Any) -> list[ModelEvent]: ...

    def finish(self) -> list[ModelEvent]: ...


class SDKStream(Protocol):
    """What the SDKs' async streams offer: iteration, and ``close`` for the response."""

    def __aiter__(self) -> AsyncIterator[Any]: ...

    async def close(self) -> None: ...


async def run_attempt(
    provider: str,
    open_stream: Callable[[], Awaitable[SDKStream]],
    decoder: Decoder,
    sdk_failure: Callable[[Exception], ModelError | None],
) -> AsyncGenerator[ModelEvent, None]:
    """One attempt: open the SDK stream, fold its events, always close the response.

    ``sdk_failure`` maps the SDK's exceptions to typed errors (``None``: not the SDK's).
    Transport errors some SDKs let escape mid-stream, and malformed data, are mapped here.
    """
    try:
        stream = await open_stream()
    except Exception as exc:
        raise (sdk_failure(exc) or exc) from exc
    try:
        async for event in stream:
            for out in decoder.feed(event):
                yield out
    except httpx2.TransportError as exc:
        raise connection_failure(provider, exc) from exc
    except ModelError:
        raise
    except ValueError as exc:  # a data line that is not JSON
        raise ModelError(f"{provider}: the stream was malformed ({exc})") from exc
    except Exception as exc:
        raise (sdk_failure(exc) or exc) from exc
    finally:
        await stream.close()  # on cancellation too: the provider stops generating
    for out in decoder.finish():
        yield out


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
    *,
    provider: str,
    status: int | None,
    kind: str | None,
    message: str,
    retry_after: float | None = None,
) -> ModelError:
    """The typed error for one provider failure.

    ``status`` is the HTTP status (``None`` for an error event inside a stream),
    ``kind`` the error's ``type`` or ``code`` from its body, ``message`` its text.
    """
    kind = (kind or "").lower()
    lowered = message.lower()
    text = f"{provider}: {message}" if message else f"{provider}: HTTP {status}"
    if kind in _QUOTA_CODES or status == 402 or any(w in lowered for w in _QUOTA_WORDS):
        return QuotaExhausted(text)
    if kind in _CONTEXT_CODES or status == 413 or any(w in lowered for w in _CONTEXT_WORDS):
        return ContextTooLong(text)
    if kind in _AUTH_CODES or status in (401, 403):
        return AuthenticationFailed(text)
    if kind in _RATE_CODES or status == 429:
        return RateLimited(text, retry_after=retry_after)
    if kind in _OVERLOAD_CODES or status == 529:
        return Overloaded(text, retry_after=retry_after)
    if kind in _SERVER_CODES or (status is not None and status >= 500) or status == 408:
        return ProviderUnavailable(text, retry_after=retry_after)
    return ModelError(text)


def connection_failure(provider: str, exc: BaseException) -> ModelError:
    """A connection that failed, dropped or timed out (an SDK's connection error, or the
    transport error some SDKs let escape mid-stream): a timeout is ``ModelTimeout``, any
    other failure is worth a retry."""
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, httpx2.TimeoutException):
        return ModelTimeout(f"{provider}: {detail}")
    return ProviderUnavailable(f"{provider}: connection failed ({detail})")


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
