"""Backoff, retry-after, the retry driver, and how failures are classified."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from email.utils import formatdate
from time import time

import pytest

from ostinato.errors import (
    AuthenticationFailed,
    ContextTooLong,
    ModelError,
    Overloaded,
    ProviderUnavailable,
    QuotaExhausted,
    RateLimited,
)
from ostinato.models import ModelEvent, Retrying, RetryPolicy, Stop, TextDelta
from ostinato.models.failures import Endpoint, classify_failure, retry_after_seconds
from ostinato.models.retry import with_retries


def test_backoff_is_full_jitter_under_a_capped_exponential() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0)
    for retry, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (9, 5.0)]:
        delays = [policy.delay(retry) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling / 2  # spread out, not a constant
    assert policy.delay(1, retry_after=7.5) == 7.5


def test_retry_after_headers() -> None:
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    date = retry_after_seconds({"retry-after": formatdate(time() + 30, usegmt=True)})
    assert date is not None and 25 < date <= 30
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


@pytest.mark.parametrize(
    ("status", "kind", "message", "expected"),
    [
        (429, "rate_limit_exceeded", "Rate limit reached", RateLimited),
        (429, "insufficient_quota", "You exceeded your current quota", QuotaExhausted),
        (400, "invalid_request_error", "Your credit balance is too low", QuotaExhausted),
        (402, "billing_error", "Payment required", QuotaExhausted),
        (400, "context_length_exceeded", "maximum context length", ContextTooLong),
        (400, "invalid_request_error", "prompt is too long: 9 tokens > 8 maximum", ContextTooLong),
        (413, "request_too_large", "Request exceeds the maximum size", ContextTooLong),
        (401, "authentication_error", "invalid x-api-key", AuthenticationFailed),
        (403, "permission_error", "no access", AuthenticationFailed),
        (529, "overloaded_error", "Overloaded", Overloaded),
        (None, "overloaded_error", "Overloaded", Overloaded),
        (500, "api_error", "Internal server error", ProviderUnavailable),
        (503, None, "", ProviderUnavailable),
        (None, "server_error", "oops", ProviderUnavailable),
        (400, "invalid_request_error", "messages: bad", ModelError),
    ],
)
def test_classification(
    status: int | None, kind: str | None, message: str, expected: type[ModelError]
) -> None:
    error = classify_failure(Endpoint("p"), status=status, kind=kind, message=message)
    assert type(error) is expected


def scripted(
    *attempts: list[ModelEvent | Exception],
) -> tuple[list[int], Callable[[], AsyncGenerator[ModelEvent, None]]]:
    calls: list[int] = []

    def attempt() -> AsyncGenerator[ModelEvent, None]:
        script = attempts[len(calls)]
        calls.append(1)

        async def run() -> AsyncGenerator[ModelEvent, None]:
            for item in script:
                if isinstance(item, Exception):
                    raise item
                yield item

        return run()

    return calls, attempt


async def test_with_retries_announces_each_retry_and_restarts() -> None:
    calls, attempt = scripted(
        [TextDelta("par"), RateLimited("slow down", retry_after=0.0)],
        [TextDelta("whole"), Stop("end_turn")],
    )
    events = [e async for e in with_retries(attempt, RetryPolicy(base_delay=0.001))]
    assert events == [
        TextDelta("par"),
        Retrying(1, 0.0, "rate_limited: slow down"),
        TextDelta("whole"),
        Stop("end_turn"),
    ]
    assert len(calls) == 2


async def test_with_retries_gives_up_on_a_long_retry_after() -> None:
    _, attempt = scripted([Overloaded("busy", retry_after=3600)])
    with pytest.raises(Overloaded):
        [e async for e in with_retries(attempt, RetryPolicy(max_retry_after=60))]


async def test_with_retries_does_not_retry_other_errors() -> None:
    calls, attempt = scripted([QuotaExhausted("no credit")], [Stop("end_turn")])
    with pytest.raises(QuotaExhausted):
        [e async for e in with_retries(attempt)]
    assert len(calls) == 1
