"""Calling an operation: the request built from the arguments (path parameters
URL-encoded, auth applied), sent with httpx under a deadline, the response read up to a
cap; and ``openapi_tools``, which makes each operation a ``Tool`` that does this."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import httpx

from ostinato.errors import ToolError
from ostinato.messages import JSON
from ostinato.tools.base import Runner, Tool, ToolContext
from ostinato.tools.fetch import fetch_family
from ostinato.tools.openapi.document import TIMEOUT, server_url
from ostinato.tools.openapi.operations import Operation, read_operations
from ostinato.tools.schema import schema_validator

READ_METHODS = frozenset({"get", "head"})
MAX_RESPONSE_BYTES = 1_000_000
MAX_RESULT_CHARS = 100_000
MAX_ERROR_CHARS = 500


@dataclass(frozen=True, slots=True)
class BearerAuth:
    token: str


@dataclass(frozen=True, slots=True)
class ApiKeyAuth:
    name: str
    value: str
    location: Literal["header", "query"] = "header"


@dataclass(frozen=True, slots=True)
class BasicAuth:
    username: str
    password: str


Auth: TypeAlias = BearerAuth | ApiKeyAuth | BasicAuth


@dataclass(frozen=True, slots=True)
class _Request:
    url: str
    params: list[tuple[str, str]]
    headers: dict[str, str]
    json_body: Any = None
    form_body: Any = None
    has_json: bool = False


def build_request(op: Operation, base: str, arguments: JSON, auth: Auth | None) -> _Request:
    path = op.path
    params: list[tuple[str, str]] = []
    headers: dict[str, str] = {}
    for param in op.parameters:
        if param.field not in arguments or arguments[param.field] is None:
            continue
        value = arguments[param.field]
        if param.location == "path":
            path = path.replace("{" + param.name + "}", urllib.parse.quote(_scalar(value), safe=""))
        elif param.location == "query":
            values = value if isinstance(value, list) else [value]
            params += [(param.name, _scalar(v)) for v in values]
        else:
            headers[param.name] = _scalar(value)
    if isinstance(auth, BearerAuth):
        headers["Authorization"] = f"Bearer {auth.token}"
    elif isinstance(auth, ApiKeyAuth):
        if auth.location == "header":
            headers[auth.name] = auth.value
        else:
            params.append((auth.name, auth.value))
    body = arguments.get(op.body_field) if op.body is not None else None
    return _Request(
        url=base + path,
        params=params,
        headers=headers,
        json_body=body if op.body == "json" else None,
        form_body=body if op.body == "form" else None,
        has_json=op.body == "json" and op.body_field in arguments,
    )


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


async def _send(
    client: httpx.AsyncClient, op: Operation, request: _Request, auth: Auth | None, seconds: float
) -> tuple[httpx.Response, bytes, bool]:
    kwargs: dict[str, Any] = {"params": request.params, "headers": request.headers}
    if request.has_json:
        kwargs["json"] = request.json_body
    elif request.form_body is not None:
        kwargs["data"] = request.form_body
    if isinstance(auth, BasicAuth):
        kwargs["auth"] = httpx.BasicAuth(auth.username, auth.password)
    async with client.stream(op.method.upper(), request.url, timeout=seconds, **kwargs) as response:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_RESPONSE_BYTES:
                return response, b"".join(chunks)[:MAX_RESPONSE_BYTES], True
        return response, b"".join(chunks), False


def read_response(response: httpx.Response, body: bytes, truncated: bool) -> Any:
    """JSON when the response is JSON and whole, else text cut at ``MAX_RESULT_CHARS``."""
    text = body.decode(response.encoding or "utf-8", errors="replace")
    if response.status_code >= 400:
        short = text[:MAX_ERROR_CHARS] + ("…" if len(text) > MAX_ERROR_CHARS else "")
        raise ToolError(
            f"HTTP {response.status_code} {response.reason_phrase}: {short}".rstrip(": ")
        )
    if not body:
        return f"HTTP {response.status_code} {response.reason_phrase}"
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if (
        not truncated
        and len(text) <= MAX_RESULT_CHARS
        and (media == "application/json" or media.endswith("+json"))
    ):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass
    if truncated or len(text) > MAX_RESULT_CHARS:
        return (
            text[:MAX_RESULT_CHARS] + f"\n[the response was cut at {MAX_RESULT_CHARS:,} characters]"
        )
    return text


def _site_family(base: str) -> Callable[[JSON], str | None]:
    site = fetch_family({"url": base}) or base

    def family(arguments: JSON) -> str | None:
        return site

    return family


def _runner(
    op: Operation,
    base: str,
    auth: Auth | None,
    client: httpx.AsyncClient | None,
    timeout: float,
) -> Runner:
    async def run(arguments: JSON, context: ToolContext) -> Any:
        request = build_request(op, base, arguments, auth)
        try:
            if client is not None:
                response, body, truncated = await _send(client, op, request, auth, timeout)
            else:
                async with httpx.AsyncClient() as own:
                    response, body, truncated = await _send(own, op, request, auth, timeout)
        except httpx.TimeoutException:
            raise ToolError(
                f"{op.method.upper()} {op.path} took longer than {timeout:g} s"
            ) from None
        except httpx.HTTPError as exc:
            raise ToolError(
                f"{op.method.upper()} {op.path} failed: {type(exc).__name__}: {exc}"
            ) from None
        return read_response(response, body, truncated)

    return run


def openapi_tools(
    document: JSON,
    *,
    base_url: str | None = None,
    auth: Auth | None = None,
    prefix: str | None = None,
    client: httpx.AsyncClient | None = None,
    timeout: float = TIMEOUT,
) -> list[Tool]:
    """One ``Tool`` per operation of ``document`` (see the module docstring).

    ``client`` is used for every call when given (its base URL, transport and headers
    apply); otherwise each call opens its own. Raises ``ToolSourceError`` for an
    unsupported document, a duplicate tool name or no usable base URL.
    """
    operations = read_operations(document, prefix=prefix)  # refuses an unsupported version
    base = server_url(document, base_url)
    tools = []
    for op in operations:
        read = op.method in READ_METHODS
        tools.append(
            Tool(
                name=op.name,
                description=op.description,
                parameters=op.schema,
                run=_runner(op, base, auth, client, timeout),
                validate=schema_validator(op.schema, where=f"{op.method.upper()} {op.path}"),
                category="read" if read else "action",
                risk="network" if read else "write",
                idempotent=read,
                timeout=timeout + 5.0,
                # A family grant covers every call of a read operation (one site).
                family=_site_family(base) if read else None,
                untrusted=True,  # an API's answers come from outside the conversation
                bounded_check=True,
            )
        )
    return tools
