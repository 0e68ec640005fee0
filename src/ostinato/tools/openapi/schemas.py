"""OpenAPI schema objects as self-contained JSON Schema: local ``$ref``s inlined (a
recursive one becomes an open schema), OpenAPI 3.0's ``nullable`` and boolean
``exclusiveMinimum`` / ``exclusiveMaximum`` translated, an ``allOf`` of plain object
schemas merged into one."""

from __future__ import annotations

import logging
from typing import Any

from ostinato.messages import JSON
from ostinato.tools.schema import ToolSourceError

log = logging.getLogger(__name__)

_MAX_DEPTH = 32


class Schemas:
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
