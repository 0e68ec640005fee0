"""The errors ostinato raises, split by whose fault they are.

::

    OstinatoError
    ├── ClientError                 the caller's fault (HTTP 4xx)
    │   ├── Forbidden               403: the caller may not use this route
    │   ├── NotFound                404: no such conversation, turn, ...
    │   ├── Conflict                409: the request clashes with the current state
    │   │   └── AlreadyAnswered     a tool call that has its result got a second one
    │   └── InvalidRequest          422: the input is malformed
    ├── ModelError                  the model provider's fault
    │   ├── ModelTimeout            a call passed its deadline
    │   ├── StreamIncomplete        the stream ended without its final event
    │   ├── RetryableModelError     worth another attempt after a pause
    │   │   ├── RateLimited         429
    │   │   ├── Overloaded          Anthropic 529 / ``overloaded_error``
    │   │   ├── ProviderUnavailable 5xx, connection reset
    │   │   └── StreamIdle          the provider sent nothing for the idle timeout
    │   ├── QuotaExhausted          credit or spend limit reached (not retried)
    │   ├── SpendLimitReached       ours: a budget refused the call before it was made
    │   ├── AuthenticationFailed    bad key, no permission (not retried)
    │   └── ContextTooLong          the request is larger than the model's window
    ├── ToolError                   a tool's fault; becomes a tool_result the model sees
    │   ├── ToolArgumentsInvalid    arguments failed the tool's schema
    │   └── ToolTimeout             the tool passed its deadline
    ├── StoreError                  ours: the store could not do what it must
    └── Unavailable                 ours, for now (HTTP 503, with ``retry_after``)
        ├── ShuttingDown            the server is stopping and begins no new turn
        └── StoreBusy               no database connection came free in time

A failing tool never raises out of a turn: the loop turns every ``ToolError`` (and any
other exception a tool raises) into an error ``tool_result``.
"""

from __future__ import annotations


class OstinatoError(Exception):
    """Base of every error ostinato raises on purpose."""

    code: str = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ClientError(OstinatoError):
    """The request is wrong; ``status`` is the HTTP status to answer with."""

    status: int = 400
    code = "bad_request"


class Forbidden(ClientError):
    status = 403
    code = "forbidden"


class NotFound(ClientError):
    status = 404
    code = "not_found"


class Conflict(ClientError):
    status = 409
    code = "conflict"


class AlreadyAnswered(Conflict):
    """A write gave a tool call a second result: the store keeps one result per call
    (the first), so nothing of that write was applied. ``calls`` are the tool_use ids
    that already had their result.

    For a writer of results (a turn, its cancellation, recovery, a history repair) this
    is the normal outcome of a lost race, not a failure: someone else answered the call
    first. ``ostinato.store.answered.write_answers`` writes the rest without them."""

    def __init__(self, message: str, calls: frozenset[str]) -> None:
        super().__init__(message)
        self.calls = calls


class InvalidRequest(ClientError):
    status = 422
    code = "invalid_request"


class ModelError(OstinatoError):
    """A model call failed for a reason on the provider's side."""

    code = "model_error"
    retryable: bool = False


class ModelTimeout(ModelError):
    code = "model_timeout"


class SpendLimitReached(ModelError):
    """A budget (``ostinato.spend``) refused a side call before it was made: no provider
    was asked, and the call's caller handles it as it handles a failed call (the router
    falls back to the default skill, compaction to dropping steps, a job stops)."""

    code = "spend_limit"


class StreamIncomplete(ModelError):
    code = "stream_incomplete"


class RetryableModelError(ModelError):
    """A failure that may pass: retried with backoff, honouring ``retry_after``."""

    retryable = True

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RateLimited(RetryableModelError):
    code = "rate_limited"


class Overloaded(RetryableModelError):
    code = "overloaded"


class ProviderUnavailable(RetryableModelError):
    code = "provider_unavailable"


class StreamIdle(RetryableModelError):
    """The provider accepted the call, then sent nothing for longer than the idle timeout."""

    code = "stream_idle"


class QuotaExhausted(ModelError):
    code = "quota_exhausted"


class AuthenticationFailed(ModelError):
    code = "authentication_failed"


class ContextTooLong(ModelError):
    code = "context_too_long"


class ToolError(OstinatoError):
    """A tool failed; the loop hands ``message`` to the model as an error result."""

    code = "tool_error"


class ToolArgumentsInvalid(ToolError):
    code = "invalid_arguments"


class ToolTimeout(ToolError):
    code = "tool_timeout"


class StoreError(OstinatoError):
    code = "store_error"


class Unavailable(OstinatoError):
    """The server cannot do this now, through no fault of the caller (HTTP 503);
    ``retry_after`` (seconds) is a fair wait before trying again, if there is one."""

    status: int = 503
    code = "unavailable"

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ShuttingDown(Unavailable):
    code = "shutting_down"


class StoreBusy(Unavailable):
    """Every connection of the store's pool stayed in use past the pool's wait
    (``pool_timeout``): backpressure, answered 503 with ``Retry-After``, not a failure
    of the database (deploy.md says how the pool is sized)."""

    code = "store_busy"
