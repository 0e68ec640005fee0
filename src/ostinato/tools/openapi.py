"""Tools from an OpenAPI document: each operation a tool.

``openapi_tools(document)`` reads an OpenAPI 3.0 or 3.1 document and makes one ``Tool``
per operation:

- the **name** is the ``operationId`` (else method and path), sanitised, optionally
  prefixed; two operations with one name are a ``ToolSourceError``;
- the **parameters** schema holds one property per path, query and header parameter, and
  ``body`` for a JSON (or form) request body; local ``$ref``s are inlined (a recursive one
  becomes an open schema), OpenAPI 3.0's ``nullable`` and boolean ``exclusiveMinimum``
  become JSON Schema, and an ``allOf`` of plain object schemas is merged into one;
- the **call** substitutes and URL-encodes path parameters, sends query parameters,
  headers and the body with httpx, with the configured auth and timeout; a response of
  400 or more is a ``ToolError`` with its status and the start of its body; any other is
  returned as JSON (when it is JSON) or text, cut at a cap;
- the **risk**: GET and HEAD operations are ``network`` reads, idempotent; every other
  method is ``write``, not idempotent, so an approval policy asks before it runs.

Cookie parameters and request bodies that are neither JSON nor form-encoded are not
supported: such an operation still becomes a tool without them, and a required one
makes the operation be left out (logged).
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

import httpx
import yaml

from ostinato.errors import ToolError
from ostinato.messages import JSON
from ostinato.tools.base import Runner, Tool, ToolContext
from ostinato.tools.fetch import fetch_family
from ostinato.tools.schema import ToolSourceError, sanitize_name, schema_validator, unique_names

log = logging.getLogger(__name__)

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
READ_METHODS = frozenset({"get", "head"})
MAX_RESPONSE_BYTES = 1_000_000
MAX_RESULT_CHARS = 100_000
MAX_ERROR_CHARS = 500
TIMEOUT = 30.0
_MAX_DEPTH = 32
_LOCATIONS = ("path", "query", "header")
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})


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


# --- loading ---------------------------------------------------------------------------------


async def load_openapi(source: str | Path, *, client: httpx.AsyncClient | None = None) -> JSON:
    """Read a document (JSON or YAML) from a file path or an http(s) URL.

    Fetched from a URL, a relative (or absent) ``servers`` URL is made absolute against
    the document's own URL, as the specification says.
    """
    text_source = str(source)
    if text_source.startswith(("http://", "https://")):
        if client is None:
            async with httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=True) as own:
                response = await own.get(text_source)
        else:
            response = await client.get(text_source)
        if response.status_code >= 400:
            raise ToolSourceError(f"{text_source}: HTTP {response.status_code}")
        document = parse_document(response.text, where=text_source)
        _absolute_servers(document, str(response.url))
        return document
    path = Path(source)
    try:
        text = await asyncio.to_thread(path.read_text, encoding="utf-8")
    except OSError as exc:
        raise ToolSourceError(f"{path}: {exc.strerror or exc}") from None
    return parse_document(text, where=str(path))


def parse_document(text: str, *, where: str = "OpenAPI document") -> JSON:
    try:
        document = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ToolSourceError(f"{where}: not JSON or YAML: {exc}") from None
    if not isinstance(document, dict):
        raise ToolSourceError(f"{where}: an OpenAPI document is an object")
    return document


def _absolute_servers(document: JSON, document_url: str) -> None:
    servers = document.get("servers") or [{"url": "/"}]
    for server in servers:
        if isinstance(server, dict) and isinstance(server.get("url"), str):
            server["url"] = urllib.parse.urljoin(document_url, server["url"])
    document["servers"] = servers


# --- schemas ---------------------------------------------------------------------------------


class _Schemas:
    """Inline local ``$ref``s and translate OpenAPI 3.0 schema quirks to JSON Schema."""

    def __init__(self, document: JSON) -> None:
        self.document = document
        self.legacy = str(document.get("openapi", "")).startswith("3.0")

    def deref(self, node: Any, stack: tuple[str, ...] = ()) -> Any:
        """``node`` with a top-level ``$ref`` followed (not recursively)."""
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in stack:
                return {}
            stack = (*stack, ref)
            node = self._target(ref)
        return node

    def _target(self, ref: str) -> Any:
        if not ref.startswith("#/"):
            log.warning("OpenAPI: external $ref %s is not followed; any value is accepted", ref)
            return {}
        node: Any = self.document
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                raise ToolSourceError(f"OpenAPI: $ref {ref} points nowhere")
            node = node[part]
        return node

    def schema(self, node: Any, stack: tuple[str, ...] = ()) -> Any:
        """A self-contained JSON Schema for an OpenAPI schema object."""
        if isinstance(node, list):
            return [self.schema(item, stack) for item in node]
        if not isinstance(node, dict):
            return node
        if isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in stack or len(stack) >= _MAX_DEPTH:
                return {"description": f"(recursive: {ref.rsplit('/', 1)[-1]})"}
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            target = self.schema(self._target(ref), (*stack, ref))
            return {**target, **self.schema(siblings, stack)} if siblings else target
        out = {key: self._keyword(key, value, stack) for key, value in node.items()}
        if self.legacy:
            out = _from_openapi30(out)
        if "allOf" in out:
            out = _merge_all_of(out)
        return out

    def _keyword(self, key: str, value: Any, stack: tuple[str, ...]) -> Any:
        if key in ("properties", "patternProperties", "$defs", "definitions") and isinstance(
            value, dict
        ):
            return {name: self.schema(sub, stack) for name, sub in value.items()}
        if key in ("example", "examples", "default", "const", "enum", "discriminator", "xml"):
            return value
        return self.schema(value, stack)


def _from_openapi30(schema: JSON) -> JSON:
    out = {k: v for k, v in schema.items() if k not in ("nullable", "discriminator", "xml")}
    for bound, exclusive in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if isinstance(out.get(exclusive), bool) and out.pop(exclusive) and bound in out:
            out[exclusive] = out.pop(bound)
    if schema.get("nullable") is True:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
            if "enum" in out and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
        elif kind is None:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


_MERGEABLE = frozenset({"type", "properties", "required", "description", "title"})


def _merge_all_of(schema: JSON) -> JSON:
    """Merge ``allOf`` parts that are plain object schemas with no clashing properties;
    anything else (a union inside, conflicting definitions) is left as ``allOf``."""
    parts = schema["allOf"]
    if not isinstance(parts, list):
        return schema
    if (
        len(parts) == 1
        and isinstance(parts[0], dict)
        and set(schema) - {"allOf"} <= {"description", "title"}
    ):
        return {**parts[0], **{k: v for k, v in schema.items() if k != "allOf"}}
    merged: JSON = {"type": "object", "properties": {}, "required": []}
    for part in [*parts, {k: v for k, v in schema.items() if k != "allOf"}]:
        if not isinstance(part, dict) or not set(part) <= _MERGEABLE:
            return schema
        if part.get("type", "object") != "object":
            return schema
        for name, sub in (part.get("properties") or {}).items():
            if name in merged["properties"] and merged["properties"][name] != sub:
                return schema
            merged["properties"][name] = sub
        merged["required"] += [r for r in part.get("required", []) if r not in merged["required"]]
        for key in ("description", "title"):
            if key in part:
                merged.setdefault(key, part[key])
    if not merged["required"]:
        del merged["required"]
    return merged


# --- operations --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str
    location: Literal["path", "query", "header"]
    field: str


@dataclass(slots=True)
class Operation:
    """One operation, read from the document: what a call needs to be made."""

    method: str
    path: str
    name: str
    description: str
    parameters: list[Parameter] = field(default_factory=list)
    properties: JSON = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    body: Literal["json", "form"] | None = None
    body_field: str = "body"

    @property
    def schema(self) -> JSON:
        schema: JSON = {
            "type": "object",
            "properties": self.properties,
            "additionalProperties": False,
        }
        if self.required:
            schema["required"] = self.required
        return schema


class _Unsupported(Exception):
    pass


def read_operations(document: JSON, *, prefix: str | None = None) -> list[Operation]:
    """Every operation of ``document``, in document order."""
    version = str(document.get("openapi", ""))
    if not version.startswith("3."):
        raise ToolSourceError(
            f"only OpenAPI 3.0 and 3.1 documents are supported, not {version or 'this one'!r}"
        )
    schemas = _Schemas(document)
    operations: list[Operation] = []
    for path, item in (document.get("paths") or {}).items():
        item = schemas.deref(item)
        if not isinstance(item, dict):
            continue
        for method in METHODS:
            raw = item.get(method)
            if not isinstance(raw, dict):
                continue
            try:
                operations.append(_operation(schemas, path, method, item, raw, prefix))
            except _Unsupported as exc:
                log.warning("OpenAPI: %s %s left out: %s", method.upper(), path, exc)
    unique_names(
        ((op.name, f"{op.method.upper()} {op.path}") for op in operations), source="OpenAPI"
    )
    return operations


def _operation(
    schemas: _Schemas, path: str, method: str, item: JSON, raw: JSON, prefix: str | None
) -> Operation:
    name = raw.get("operationId") or f"{method}_{path}"
    summary = str(raw.get("summary") or "").strip()
    details = str(raw.get("description") or "").strip()
    description = "\n\n".join(part for part in (summary, details) if part) or (
        f"{method.upper()} {path}"
    )
    if raw.get("deprecated"):
        description = "(deprecated) " + description
    op = Operation(method, path, sanitize_name(str(name), prefix=prefix), description[:2048])
    merged: dict[tuple[str, str], JSON] = {}
    for param in [*(item.get("parameters") or []), *(raw.get("parameters") or [])]:
        param = schemas.deref(param)
        if isinstance(param, dict) and "name" in param and "in" in param:
            merged[(str(param["in"]), str(param["name"]))] = param
    for (location, pname), param in merged.items():
        _add_parameter(schemas, op, location, pname, param)
    if raw.get("requestBody") is not None:
        _add_body(schemas, op, schemas.deref(raw["requestBody"]))
    return op


def _add_parameter(schemas: _Schemas, op: Operation, location: str, name: str, param: JSON) -> None:
    required = bool(param.get("required")) or location == "path"
    if location == "header" and name.lower() in _IGNORED_HEADERS:
        return  # the specification says these are ignored: the client and auth set them
    if location not in _LOCATIONS:
        if required:
            raise _Unsupported(f"required {location} parameter {name!r}")
        return
    schema = param.get("schema")
    if schema is None and isinstance(param.get("content"), dict) and param["content"]:
        schema = next(iter(param["content"].values())).get("schema")
    prop = dict(schemas.schema(schema or {}))
    if param.get("description") and "description" not in prop:
        prop["description"] = str(param["description"])
    field_name = name if name not in op.properties else f"{location}_{name}"
    op.properties[field_name] = prop
    op.parameters.append(Parameter(name, location, field_name))  # type: ignore[arg-type]
    if required:
        op.required.append(field_name)


def _add_body(schemas: _Schemas, op: Operation, body: Any) -> None:
    if not isinstance(body, dict):
        return
    content: Mapping[str, Any] = body.get("content") or {}
    chosen = None
    for media, kind in _body_kinds(content):
        chosen = (content[media], kind)
        break
    if chosen is None:
        if body.get("required"):
            raise _Unsupported(f"request body of type {', '.join(content) or 'unknown'}")
        return
    media_object, kind = chosen
    op.body = kind
    op.body_field = "body" if "body" not in op.properties else "request_body"
    prop = dict(schemas.schema((media_object or {}).get("schema") or {}))
    if body.get("description") and "description" not in prop:
        prop["description"] = str(body["description"])
    op.properties[op.body_field] = prop
    if body.get("required"):
        op.required.append(op.body_field)


def _body_kinds(content: Mapping[str, Any]) -> list[tuple[str, Literal["json", "form"]]]:
    kinds: list[tuple[str, Literal["json", "form"]]] = []
    for media in content:
        base = media.split(";")[0].strip().lower()
        if base == "application/json" or base.endswith("+json"):
            kinds.insert(0, (media, "json"))
        elif base == "application/x-www-form-urlencoded":
            kinds.append((media, "form"))
    return kinds


# --- calling -------------------------------------------------------------------------------------


def _site_family(base: str) -> Callable[[JSON], str | None]:
    site = fetch_family({"url": base}) or base

    def family(arguments: JSON) -> str | None:
        return site

    return family


def server_url(document: JSON, base_url: str | None) -> str:
    """The base URL calls go to: ``base_url``, else the document's first server (its
    variables at their defaults); it must be absolute."""
    if base_url is None:
        servers = document.get("servers") or []
        if servers and isinstance(servers[0], dict) and isinstance(servers[0].get("url"), str):
            base_url = servers[0]["url"]
            for var, spec in (servers[0].get("variables") or {}).items():
                base_url = base_url.replace("{" + var + "}", str(spec.get("default", "")))
    if not base_url or not base_url.startswith(("http://", "https://")):
        raise ToolSourceError(
            "OpenAPI: no absolute base URL (give base_url, or load the document from its URL)"
        )
    return base_url.rstrip("/")


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
    base = server_url(document, base_url)
    tools = []
    for op in read_operations(document, prefix=prefix):
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
            )
        )
    return tools
