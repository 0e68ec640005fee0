"""The client's errors, split by whose fault they are::

OstinatoClientError             anything this client raises
├── TransportError              the server could not be reached, or the connection broke
└── APIError                    the server answered with an error (status, code, message)
    ├── InvalidRequest          400 / 422: the request was wrong
    ├── Unauthorized            401: no key, or a wrong, revoked or expired one
    ├── Forbidden               403
    ├── NotFound                404: no such conversation (or not the caller's), ...
    ├── Conflict                409: a turn runs, the card is not the one waiting, ...
    ├── TooLarge                413: a body or a file over its limit
    ├── RateLimited             429: over a per-owner limit; ``retry_after`` seconds
    └── ServerError             5xx: the server's fault
"""

from __future__ import annotations

from typing import Any


class OstinatoClientError(Exception):
    """Anything this client raises."""


class TransportError(OstinatoClientError):
    """The server could not be reached, or the connection broke."""


class APIError(OstinatoClientError):
    """The server answered with an error: ``status``, ``code`` (for programs) and
    ``message`` (for people), as in docs/api.md."""

    def __init__(self, status: int, code: str, message: str, body: Any = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.body = status, code, message, body


class InvalidRequest(APIError):
    pass


class Unauthorized(APIError):
    pass


class Forbidden(APIError):
    pass


class NotFound(APIError):
    pass


class Conflict(APIError):
    pass


class TooLarge(APIError):
    pass


class RateLimited(APIError):
    retry_after: float | None = None


class ServerError(APIError):
    pass


_BY_STATUS: dict[int, type[APIError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
    422: InvalidRequest,
    429: RateLimited,
}


def api_error(status: int, body: Any, headers: Any = None) -> APIError:
    """The error for an answer with ``status`` and JSON ``body``."""
    error = body.get("error") if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else {}
    code = str(error.get("code") or f"http_{status}")
    message = str(error.get("message") or body or f"HTTP {status}")
    kind = _BY_STATUS.get(status, ServerError if status >= 500 else APIError)
    found = kind(status, code, message, body)
    if isinstance(found, RateLimited) and headers is not None:
        retry = headers.get("retry-after")
        found.retry_after = float(retry) if retry else None
    return found
