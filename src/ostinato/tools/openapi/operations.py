"""The operations of a document: for each, its name, description, parameters and body,
and the JSON schema of its arguments (``Operation``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ostinato.messages import JSON
from ostinato.tools.openapi.schemas import Schemas
from ostinato.tools.schema import ToolSourceError, sanitize_name, unique_names

log = logging.getLogger(__name__)

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_LOCATIONS = ("path", "query", "header")
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})


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
        found = (
            f"OpenAPI {version}"
            if version
            else f"Swagger {document['swagger']}"
            if "swagger" in document
            else "a document without an 'openapi' version"
        )
        raise ToolSourceError(f"only OpenAPI 3.0 and 3.1 documents are supported, not {found}")
    schemas = Schemas(document)
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
    schemas: Schemas, path: str, method: str, item: JSON, raw: JSON, prefix: str | None
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


def _add_parameter(schemas: Schemas, op: Operation, location: str, name: str, param: JSON) -> None:
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


def _add_body(schemas: Schemas, op: Operation, body: Any) -> None:
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
