"""JSON schemas from outside (a caller, a model, a remote MCP server, an OpenAPI
document), compiled so that checking a value against them reads nothing and ends soon.

What ``compile_schema`` refuses (``SchemaRefused``, a 422 on the HTTP routes):

1. a schema over ``MAX_SCHEMA_BYTES`` of JSON, or nested deeper than ``MAX_DEPTH``;
2. a reference (``$ref``, ``$dynamicRef``, ``$recursiveRef``) that is not a fragment of
   the schema itself (``#``, ``#/$defs/x``, ``#anchor``);
3. a dialect other than drafts 4, 6, 7, 2019-09 and 2020-12 (``$schema``);
4. a pattern (``pattern``, a ``patternProperties`` name) the linear-time engine refuses
   (``patterns``), and ``unevaluatedProperties`` beside ``patternProperties`` (the
   library's evaluation of the two together matches in the backtracking engine);
5. a schema its dialect's metaschema rejects.

And how a compiled schema checks a value (``OutsideSchema.errors``): its references are
resolved in a registry that holds the schema and the official metaschemas and retrieves
nothing, so even a reference that slipped past rule 2 reads no network and no disk;
``pattern``, ``patternProperties`` and ``additionalProperties`` match in RE2;
``uniqueItems`` compares canonical forms in a set (linear, where the library's is
quadratic over objects); every keyword checks a deadline first, so a check (a schema
that refers to itself endlessly included) ends within its budget as ``BudgetExceeded``.
The budget is CPU time of the checking thread (``time.thread_time``): it bounds the work a
value costs, and a busy machine (other processes, the loop holding the interpreter) does
not fail a check that is cheap.
"""

from __future__ import annotations

import contextvars
import functools
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import jsonschema
import jsonschema.validators
import referencing
import referencing.exceptions
from jsonschema.exceptions import ValidationError

from ostinato.bounded.patterns import PatternRefused, compiled, search
from ostinato.bounded.work import CHECK_SECONDS, BudgetExceeded
from ostinato.errors import InvalidRequest

MAX_SCHEMA_BYTES = 256 * 1024
MAX_DEPTH = 128  # levels of JSON (a subschema under properties is two)
MAX_VALUE_BYTES = 1 << 20  # of a value checked against a schema (JSON)
REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
DIALECTS = frozenset(
    {
        "http://json-schema.org/draft-04/schema",
        "http://json-schema.org/draft-06/schema",
        "http://json-schema.org/draft-07/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    }
)

# (wall clock, thread CPU time) past which a check stops: the wall clock is read first (it
# is cheap), the thread's CPU time only once the wall clock has passed its mark
_deadline: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar(
    "ostinato_schema_deadline", default=None
)


class SchemaRefused(InvalidRequest):
    """A schema from outside that the server will not compile."""

    code = "schema_refused"


@dataclass(frozen=True, slots=True)
class OutsideSchema:
    """A compiled schema from outside; ``errors`` checks a value within a budget."""

    schema: dict[str, Any]
    validator: Any

    def errors(self, value: Any, *, seconds: float = CHECK_SECONDS) -> list[ValidationError]:
        """What is wrong with ``value``, nearest the root first; ``BudgetExceeded`` when
        the value is too large or the check would take more than ``seconds``;
        ``SchemaRefused`` when the schema turns out to be unusable for it."""
        _check_size(value, MAX_VALUE_BYTES, "the value")
        token = _deadline.set((time.monotonic() + seconds, time.thread_time() + seconds))
        try:
            found = list(self.validator.iter_errors(value))
        except RecursionError:
            raise SchemaRefused("the schema refers to itself without end") from None
        except referencing.exceptions.Unresolvable as exc:
            reference = str(getattr(exc, "ref", ""))[:100]
            raise SchemaRefused(f"the schema's reference {reference!r} points nowhere") from None
        finally:
            _deadline.reset(token)
        return sorted(found, key=lambda e: [str(p) for p in e.absolute_path])


def compile_schema(
    schema: Any, *, where: str = "the schema", seconds: float = CHECK_SECONDS
) -> OutsideSchema:
    """``schema`` compiled for checking values (rules 1-5 above); ``SchemaRefused``.

    ``seconds`` bounds the check against the metaschema (rule 5); a schema the server
    itself ships passes ``math.inf``, so a busy machine cannot fail its start."""
    if not isinstance(schema, dict):
        raise SchemaRefused(f"{where} must be a JSON object")
    try:
        _check_size(schema, MAX_SCHEMA_BYTES, where)
        _walk(schema, where, 0, found=set())
    except PatternRefused as exc:
        raise SchemaRefused(f"{where}: {exc.message}") from None
    except BudgetExceeded as exc:
        raise SchemaRefused(exc.message) from None
    dialect = schema.get("$schema")
    if dialect is not None and str(dialect).rstrip("#") not in DIALECTS:
        raise SchemaRefused(f"{where}: the dialect {str(dialect)[:100]!r} is not supported")
    base = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls = _bounded(base)
    meta = _bounded(jsonschema.validators.validator_for(base.META_SCHEMA, default=base))
    checker = OutsideSchema(base.META_SCHEMA, meta(base.META_SCHEMA, registry=_registry()))
    problems = checker.errors(schema, seconds=seconds)
    if problems:
        best = jsonschema.exceptions.best_match(problems)
        raise SchemaRefused(f"{where}: not a valid JSON schema: {best.message[:300]}")
    return OutsideSchema(schema, cls(schema, registry=_registry()))


def _registry() -> referencing.Registry[Any]:
    """A registry that retrieves nothing: the library adds the official metaschemas."""
    return referencing.Registry()


def _check_size(value: Any, limit: int, what: str) -> None:
    try:
        size = len(json.dumps(value, ensure_ascii=False, check_circular=False, default=str))
    except (RecursionError, ValueError):
        raise BudgetExceeded(f"{what} is nested too deeply") from None
    if size > limit:
        raise BudgetExceeded(f"{what} is {size:,} bytes of JSON; at most {limit:,} are checked")


def _walk(node: Any, where: str, depth: int, *, found: set[str]) -> None:
    """Rules 1, 2 and 4 over every object in the schema (data under ``enum`` or
    ``default`` too: a reference may point anywhere in the document)."""
    if depth > MAX_DEPTH:
        raise SchemaRefused(f"{where} is nested deeper than {MAX_DEPTH} levels")
    if isinstance(node, list):
        for item in node:
            _walk(item, where, depth + 1, found=found)
        return
    if not isinstance(node, dict):
        return
    _rules(node, where, found)
    for value in node.values():
        _walk(value, where, depth + 1, found=found)


def _rules(node: dict[str, Any], where: str, found: set[str]) -> None:
    for keyword in REFERENCES:
        target = node.get(keyword)
        if isinstance(target, str) and not target.startswith("#"):
            raise SchemaRefused(
                f"{where}: {keyword} {target[:100]!r} points outside the schema; a schema "
                "may only refer to its own parts (#, #/$defs/..., #anchor)"
            )
    if isinstance(node.get("pattern"), str):
        compiled(node["pattern"])
    if isinstance(node.get("patternProperties"), dict):
        found.add("patternProperties")
        for pattern in node["patternProperties"]:
            compiled(pattern)
    if "unevaluatedProperties" in node:
        found.add("unevaluatedProperties")
    if {"patternProperties", "unevaluatedProperties"} <= found:
        raise SchemaRefused(f"{where}: unevaluatedProperties with patternProperties is refused")


# -- the keywords that differ from the library's, and the deadline on every keyword --

Keyword = Callable[[Any, Any, Any, dict[str, Any]], Iterator[ValidationError] | None]


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not search(pattern, instance):
        yield ValidationError(f"{_short(instance)} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for name, value in instance.items():
            if search(pattern, name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    named = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [
        name
        for name in instance
        if name not in named and not any(search(p, name) for p in patterns)
    ]
    if validator.is_type(extra, "object"):
        for name in extras:
            yield from validator.descend(instance[name], extra, path=name)
    elif extra is False and extras:
        listed = ", ".join(repr(name) for name in sorted(extras)[:10])
        more = f" and {len(extras) - 10} more" if len(extras) > 10 else ""
        verb = "was" if len(extras) == 1 else "were"
        yield ValidationError(
            f"Additional properties are not allowed ({listed}{more} {verb} unexpected)"
        )


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for item in instance:
        key = canonical(item)
        if key in seen:
            yield ValidationError(f"has non-unique elements ({_short(item)} more than once)")
            return
        seen.add(key)


def canonical(value: Any) -> Any:
    """A hashable form of a JSON value that is equal for values JSON Schema calls equal:
    ``1`` and ``1.0`` alike, ``true`` and ``1`` apart, objects whatever their order."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(canonical(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, canonical(v)) for k, v in value.items()))
    return ("null", None)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


_OURS: dict[str, Keyword] = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items,
}


def _on_time(keyword: Keyword) -> Keyword:
    def checked(validator: Any, value: Any, instance: Any, schema: dict[str, Any]) -> Any:
        deadline = _deadline.get()
        if (
            deadline is not None
            and time.monotonic() > deadline[0]
            and time.thread_time() > deadline[1]
        ):
            raise BudgetExceeded("checking the value against its schema took too long")
        return keyword(validator, value, instance, schema)

    return checked


@functools.cache
def _bounded(base: Any) -> Any:
    """``base`` (a dialect's validator class) with our keywords and the deadline."""
    keywords = {name: _on_time(_OURS.get(name, fn)) for name, fn in base.VALIDATORS.items()}
    return jsonschema.validators.extend(base, keywords)  # type: ignore[no-untyped-call]
