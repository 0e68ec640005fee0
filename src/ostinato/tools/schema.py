"""What tools from other sources share: safe names and JSON-schema validation.

OpenAPI operations and MCP tools arrive with names any string may be, and with raw JSON
schemas rather than Python signatures. ``sanitize_name`` turns a name into one every
provider accepts (``^[a-zA-Z0-9_-]{1,64}$``); ``schema_validator`` checks a call's
arguments against its schema (compiled by ``ostinato.bounded.schemas``) before the tool
runs.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ostinato.errors import InvalidRequest, ToolArgumentsInvalid
from ostinato.messages import JSON
from ostinato.tools.base import Validator

if TYPE_CHECKING:
    import jsonschema.exceptions

MAX_NAME = 64
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_UNSAFE = re.compile(r"_*[^a-zA-Z0-9_-]+_*")
_MAX_PROBLEMS = 5


class ToolSourceError(ValueError):
    """A tool source is misconfigured: two operations with one name, a schema that is not
    a schema, an operation with no base URL. Raised while the source is mounted, never
    while a turn runs."""


def sanitize_name(name: str, *, prefix: str | None = None) -> str:
    """A tool name every provider accepts: ``^[a-zA-Z0-9_-]{1,64}$``.

    Runs of other characters (with the ``_`` around them) become one ``_``; leading and
    trailing ``_`` go. ``prefix`` (a server or document name) is joined with ``_``. A
    name longer than 64 characters is cut and ends with a hash of the whole, so two long
    names stay apart.
    """
    joined = f"{prefix}_{name}" if prefix else name
    if _NAME.match(joined):
        return joined
    safe = _UNSAFE.sub("_", joined).strip("_") or "tool"
    if len(safe) <= MAX_NAME:
        return safe
    digest = hashlib.sha256(joined.encode()).hexdigest()[:8]
    return f"{safe[: MAX_NAME - 9].rstrip('_')}_{digest}"


def unique_names(names: Iterable[tuple[str, str]], *, source: str) -> None:
    """Raise ``ToolSourceError`` when two originals sanitise to one tool name.

    ``names`` holds ``(tool name, where it came from)`` pairs.
    """
    seen: dict[str, str] = {}
    for name, origin in names:
        if name in seen:
            raise ToolSourceError(
                f"{source}: {origin} and {seen[name]} both become the tool {name!r}; "
                "tool names must be unique within a source"
            )
        seen[name] = origin


def object_schema(schema: JSON | None) -> JSON:
    """A tool's parameters must describe an object; an absent schema takes no arguments."""
    if not schema:
        return {"type": "object", "properties": {}}
    if schema.get("type") != "object":
        raise ToolSourceError(f"a tool's parameters must be an object schema, not {schema!r}")
    return schema


def schema_validator(schema: JSON, *, where: str = "tool", shipped: bool = False) -> Validator:
    """A ``Tool.validate`` that checks arguments against ``schema`` (its ``$schema``
    dialect, else draft 2020-12) and raises ``ToolArgumentsInvalid`` naming each problem.

    The schema is compiled as one from outside (``ostinato.bounded.schemas``: no
    reference leaves it, patterns run in RE2, each check has a time and size budget);
    give the tool ``bounded_check=True`` so the loop runs the check off the event loop.
    A schema that is invalid or refused is a ``ToolSourceError`` now, not at call time.
    A ``shipped`` schema (one of ostinato's own tools) is compiled without the budget
    meant for schemas from outside: a server too busy to meet it must still start.
    """
    from ostinato.bounded.schemas import compile_schema
    from ostinato.bounded.work import CHECK_SECONDS

    budget = math.inf if shipped else CHECK_SECONDS
    try:
        compiled = compile_schema(schema, where=where, seconds=budget)
    except InvalidRequest as exc:
        raise ToolSourceError(exc.message) from None

    def validate(arguments: JSON) -> JSON:
        try:
            errors = compiled.errors(arguments)
        except InvalidRequest as exc:
            raise ToolArgumentsInvalid(exc.message) from None
        if errors:
            raise ToolArgumentsInvalid(explain(errors))
        return arguments

    return validate


def explain(errors: list[jsonschema.exceptions.ValidationError]) -> str:
    problems = []
    for error in errors[:_MAX_PROBLEMS]:
        where = ".".join(str(p) for p in error.absolute_path) or "arguments"
        message = error.message if len(error.message) <= 200 else error.message[:200] + "…"
        problems.append(f"{where}: {message}")
    if len(errors) > _MAX_PROBLEMS:
        problems.append(f"and {len(errors) - _MAX_PROBLEMS} more")
    return "invalid arguments: " + "; ".join(problems)
