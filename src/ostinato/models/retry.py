"""Attempts and retries.

``run_attempt`` is one model call for any adapter: open the SDK's stream, fold its events
through the adapter's pure decoder, always close the HTTP response (also when the caller
closes the generator or is cancelled, so the provider stops generating), and turn every
failure into an error from ``ostinato.errors`` (``ostinato.models.failures`` classifies
them and names the server).

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
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Protocol

from ostinato.errors import ModelError, RetryableModelError
from ostinato.models.base import ModelEvent, Retrying
from ostinato.models.failures import Endpoint, connection_failure


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
    endpoint: Endpoint,
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
    import httpx2  # the SDK's HTTP client, loaded with the SDK (not with ostinato.models)

    try:
        async for event in stream:
            for out in decoder.feed(event):
                yield out
    except httpx2.TransportError as exc:
        raise connection_failure(endpoint, exc) from exc
    except ModelError:
        raise
    except ValueError as exc:  # a data line that is not JSON
        raise ModelError(endpoint.say(f"the stream was malformed ({exc})")) from exc
    except Exception as exc:
        raise (sdk_failure(exc) or exc) from exc
    finally:
        await stream.close()  # on cancellation too: the provider stops generating
    for out in decoder.finish():
        yield out
