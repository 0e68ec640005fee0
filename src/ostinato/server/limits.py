"""Request body limits: every body is counted as it arrives and refused past its limit.

Three kinds of body, each with its own limit (``BodyLimits``):

- ``message``: a turn sent as JSON, a WebSocket message, and any body of a route not
  named below (decisions, facts, tool switches);
- ``metadata``: a conversation's own fields (``POST /v1/conversations``, and ``PATCH`` of
  one): its title and metadata;
- ``upload``: a turn sent as a multipart form with files;
- ``import``: a file sent to ``POST /v1/import``.

A body over its limit is answered 413 ``too_large`` (the JSON error says the limit and
the kind) before it is read any further: at once when ``Content-Length`` says so,
otherwise as soon as the bytes counted so far pass the limit (a chunked body). The
route never sees a byte of it, so nothing is stored. WebSocket messages are bounded by
the ASGI server (``ws_max_size``, which ``ostinato serve`` sets to ``message_bytes``)
and again by the socket's handler.

The counting is Starlette's (``RequestBodyLimitMiddleware``); this module picks the
limit per request and answers a declared oversize itself, with our error JSON. Only a
body of no declared length (``Transfer-Encoding: chunked``) is counted: one with a
``Content-Length`` within the limit cannot be longer (the ASGI server reads that many
bytes and no more), so its request goes through one layer here, not two.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from starlette.datastructures import Headers
from starlette.middleware.body_limit import MAX_BODY_SIZE_SCOPE_KEY, RequestBodyLimitMiddleware
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ostinato.attachments import MAX_TOTAL_BYTES

BodyKind = Literal["message", "metadata", "upload", "import"]

KIB = 1024
MIB = 1024 * KIB
KIND_SCOPE_KEY = "ostinato.body_kind"  # which limit applies to this request

_TURNS = re.compile(r"^/v1/conversations/[^/]+/turns/?$")
_CONVERSATION = re.compile(r"^/v1/conversations(/[^/]+)?/?$")


@dataclass(frozen=True, slots=True)
class BodyLimits:
    """The largest body, in bytes, that each kind of request may send."""

    message_bytes: int = 1 * MIB
    metadata_bytes: int = 64 * KIB
    upload_bytes: int = MAX_TOTAL_BYTES + 256 * KIB  # the files, plus form framing
    import_bytes: int = 100 * MIB

    def __post_init__(self) -> None:
        for name in ("message_bytes", "metadata_bytes", "upload_bytes", "import_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number of bytes >= 1, got {value!r}")

    def of(self, kind: BodyKind) -> int:
        match kind:
            case "message":
                return self.message_bytes
            case "metadata":
                return self.metadata_bytes
            case "upload":
                return self.upload_bytes
            case "import":
                return self.import_bytes

    def kind_of(self, method: str, path: str, content_type: str) -> BodyKind:
        """Which limit a request's body falls under."""
        if method == "POST" and _TURNS.match(path):
            media = content_type.split(";", 1)[0].strip().lower()
            return "upload" if media == "multipart/form-data" else "message"
        if method == "POST" and path.rstrip("/") == "/v1/import":
            return "import"
        if method in ("POST", "PATCH") and _CONVERSATION.match(path):
            return "metadata"
        return "message"


def too_large_response(kind: str, limit: int) -> JSONResponse:
    """The 413 answer: the usual error JSON, saying the limit and the kind."""
    message = f"the request body is over the {kind} limit of {limit} bytes"
    error = {"code": "too_large", "message": message, "limit_bytes": limit, "kind": kind}
    return JSONResponse({"error": error}, status_code=413)


class BodyLimit:
    """ASGI middleware: bounds every HTTP request body by its kind's limit."""

    def __init__(self, app: ASGIApp, limits: BodyLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        kind = self.limits.kind_of(scope["method"], scope["path"], headers.get("content-type", ""))
        limit = self.limits.of(kind)
        scope[KIND_SCOPE_KEY] = kind
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            # Answered without reading a byte (and without a "100 Continue").
            await too_large_response(kind, limit)(scope, receive, send)
            return
        if "transfer-encoding" not in headers:
            # A body of a declared length within the limit, or none (HTTP/1.1 has no
            # other): the ASGI server passes no more than it declared, so there is
            # nothing to count, and no counting layer wraps every message of the request
            # and its response (a streamed turn's frames among them).
            scope[MAX_BODY_SIZE_SCOPE_KEY] = limit
            await self.app(scope, receive, send)
            return
        await RequestBodyLimitMiddleware(self.app, limit)(scope, receive, send)


def limit_of(scope: Scope) -> tuple[str, int] | None:
    """The kind and limit of the request being refused (for its error's message)."""
    limit = scope.get(MAX_BODY_SIZE_SCOPE_KEY)
    if not isinstance(limit, int):
        return None
    return str(scope.get(KIND_SCOPE_KEY, "request")), limit
