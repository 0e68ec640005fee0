"""Errors as JSON: every failure answers ``{"error": {"code": ..., "message": ...}}``.

- ``ClientError`` (``NotFound``, ``Conflict``, ``InvalidRequest``) -> its ``status``
  (with ``Retry-After`` when it carries a ``retry_after``, as a limit's 429 does).
- ``Unavailable`` (``ShuttingDown``) -> 503, with ``Retry-After`` when it says how long.
- Request validation (malformed JSON, a missing or wrong field, a bad query parameter)
  -> 422 ``invalid_request``, the message naming each field and what is wrong, and
  ``details`` listing them for programs.
- A body that cannot be parsed at all (not UTF-8, nested too deeply) -> 422
  ``invalid_request`` too (FastAPI says 400; the API promises 422 for a bad body).
- A body over its limit (``ostinato.server.limits``) -> 413 ``too_large``, saying the
  limit in bytes and the kind of body.
- Starlette's other HTTP errors (unknown route, wrong method) -> their status; a 405
  lists in ``Allow`` every method the path has.
- Anything else -> 500 ``internal_error`` with a generic message, and a log line.

Every message is passed through ``ostinato.redaction.redact`` first: no key goes out.

A WebSocket refused before its handshake completes gets the same JSON as an HTTP answer
(the ASGI denial-response extension, which uvicorn offers), or else a close code: a bad
query parameter 422 (or 1008).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request, WebSocket
from fastapi.exceptions import RequestValidationError, WebSocketRequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from ostinato.errors import ClientError, Unavailable
from ostinato.redaction import redact
from ostinato.server.limits import limit_of, too_large_response

log = logging.getLogger("ostinato.server")

_HTTP_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "too_large",
    415: "unsupported_media_type",
}


def error_response(
    status: int, code: str, message: str, details: list[dict[str, Any]] | None = None
) -> JSONResponse:
    error: dict[str, Any] = {"code": code, "message": redact(message)}
    if details is not None:
        error["details"] = details
    return JSONResponse({"error": error}, status_code=status)


def describe_validation(errors: Sequence[Any]) -> tuple[str, list[dict[str, Any]]]:
    """One sentence per error, and the errors as plain JSON."""
    sentences: list[str] = []
    details: list[dict[str, Any]] = []
    for error in errors:
        loc = [str(part) for part in error.get("loc", ())]
        kind = str(error.get("type", ""))
        sentence = _sentence(kind, loc, str(error.get("msg", "invalid")), error.get("ctx"))
        sentences.append(sentence)
        details.append({"loc": loc, "type": kind, "message": sentence})
    return "; ".join(sentences) or "the request is invalid", details


def _sentence(kind: str, loc: list[str], msg: str, ctx: Any) -> str:
    if kind == "json_invalid":
        reason = ctx.get("error") if isinstance(ctx, dict) else None
        where = f" at position {loc[1]}" if len(loc) > 1 else ""
        return f"the body is not valid JSON ({reason or 'decode error'}{where})"
    if loc == ["body"]:
        if kind == "missing":
            return "a JSON body is required"
        if kind in ("model_attributes_type", "dict_type", "model_type"):
            return "the body must be a JSON object sent with Content-Type: application/json"
    name = ".".join(loc[1:] if loc and loc[0] in ("body", "query", "header", "path") else loc)
    where = f"{loc[0]} " if loc and loc[0] in ("query", "header", "path") else ""
    if kind == "missing":
        return f"{where}{name} is required"
    if kind == "extra_forbidden":
        return f"{where}{name} is not a known field"
    if kind == "value_error":
        reason = msg.removeprefix("Value error, ")
        return f"{where}{name} {reason}" if name else reason
    return f"{where}{name}: {msg[:1].lower() + msg[1:]}"


async def _client_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ClientError)
    response = error_response(exc.status, exc.code, exc.message, getattr(exc, "details", None))
    retry_after = getattr(exc, "retry_after", None)  # a limit (429) says when to retry
    if retry_after is not None:
        response.headers["retry-after"] = str(retry_after)
    return response


async def _unavailable(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Unavailable)
    response = error_response(exc.status, exc.code, exc.message)
    if exc.retry_after is not None:
        response.headers["retry-after"] = str(max(1, round(exc.retry_after)))
    return response


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    message, details = describe_validation(exc.errors())
    return error_response(422, "invalid_request", message, details)


def _unparsable(cause: BaseException | None) -> str:
    if isinstance(cause, UnicodeDecodeError):
        where = f"{cause.reason} at byte {cause.start}"
        return f"the body is not valid JSON (JSON must be UTF-8 text: {where})"
    if isinstance(cause, RecursionError):
        return "the body is not valid JSON (it nests too deeply)"
    return "the body is not valid JSON"


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 413 and (over := limit_of(request.scope)) is not None:
        return too_large_response(*over)
    if exc.status_code == 400:  # FastAPI could not parse the body at all
        message = _unparsable(exc.__cause__)
        detail = {"loc": ["body"], "type": "json_invalid", "message": message}
        return error_response(422, "invalid_request", message, [detail])
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    response = error_response(exc.status_code, code, str(exc.detail))
    if exc.headers:
        response.headers.update(exc.headers)
    if exc.status_code == 405:
        response.headers["allow"] = ", ".join(allowed_methods(request))
    return response


def allowed_methods(request: Request) -> list[str]:
    """The methods the API documents for the request's path (Starlette's own 405 names
    only the first route that matched the path), and HEAD wherever GET is. Where a path
    fits several templates, the ones with the fewest parameters say."""
    methods: set[str] = set()
    paths: dict[str, dict[str, Any]] = request.app.openapi().get("paths", {})
    matching = [t for t in paths if _template(t).fullmatch(request.url.path)]
    # The most specific templates only: /v1/tools/forged is that resource, not a tool
    # named "forged" of /v1/tools/{name}.
    fewest = min((t.count("{") for t in matching), default=0)
    for template in matching:
        if template.count("{") == fewest:
            operations = paths[template]
            methods.update(method.upper() for method in operations if method.upper() in _METHODS)
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


@functools.cache
def _template(path: str) -> re.Pattern[str]:
    return re.compile(re.sub(r"\\{[^}/]+\\}", "[^/]+", re.escape(path)))


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal_error", "internal server error; see the server log")


async def refuse_websocket(
    websocket: WebSocket,
    status: int,
    code: str,
    message: str,
    *,
    close_code: int,
    details: list[dict[str, Any]] | None = None,
) -> None:
    """Refuse a WebSocket before accepting it: an HTTP answer with the error's JSON where
    the server can send one, else a close with ``close_code`` (a 4xxx code is sent after
    accepting, as a close before accepting reaches the client as a bare 403)."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(error_response(status, code, message, details))
        return
    if close_code >= 4000:
        await websocket.accept()
    await websocket.close(code=close_code, reason=message[:120])


async def _websocket_validation_error(websocket: WebSocket, exc: Exception) -> None:
    assert isinstance(exc, WebSocketRequestValidationError)
    message, details = describe_validation(exc.errors())
    await refuse_websocket(
        websocket, 422, "invalid_request", message, close_code=1008, details=details
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ClientError, _client_error)
    app.add_exception_handler(Unavailable, _unavailable)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(WebSocketRequestValidationError, _websocket_validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
