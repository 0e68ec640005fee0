"""Tools from Python functions: the schema comes from type hints and the docstring.

The arguments are validated by a pydantic model built from the signature (the idea, like
the docstring handling, follows pydantic-ai's function tools), so a call with a wrong
type never reaches the function.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
from collections.abc import Callable
from typing import Any, get_type_hints

import pydantic

from ostinato.errors import ToolArgumentsInvalid
from ostinato.messages import JSON
from ostinato.tools.base import Category, Risk, Tool, ToolContext

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Returns?|Raises|Yields|Examples?|Notes?|Attributes):\s*$"
)
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and per-argument texts."""
    if not doc:
        return "", {}
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    base_indent: int | None = None
    for line in inspect.cleandoc(doc).splitlines():
        header = _SECTION.match(line)
        if header:
            section, current, base_indent = header.group(1), None, None
            continue
        if section is None:
            description.append(line)
            continue
        if section not in ("Args", "Arguments", "Parameters") or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        match = _ARG_LINE.match(line.strip())
        if match and (base_indent is None or indent <= base_indent):
            base_indent = indent
            current = match.group(1).lstrip("*")
            params[current] = match.group(3).strip()
        elif current is not None:
            params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(description).strip(), params


def function_tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    category: Category = "action",
    risk: Risk = "safe",
    idempotent: bool = True,
    timeout: float = 30.0,
    available: Callable[[], bool] | None = None,
    family: Callable[[JSON], str | None] | None = None,
    untrusted: bool = False,
    writes_memory: bool = False,
) -> Tool:
    """Make a ``Tool`` of a sync or async function.

    A parameter annotated ``ToolContext`` receives the running tool's context and is left
    out of the schema. Sync functions run in a worker thread so they never block the loop.
    """
    summary, arg_docs = parse_docstring(fn.__doc__)
    model, context_param = _arguments_model(fn, arg_docs)
    fields = [k for k in model.model_fields]
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)

    def validate(arguments: JSON) -> JSON:
        try:
            parsed = model.model_validate(arguments)
        except pydantic.ValidationError as exc:
            raise ToolArgumentsInvalid(_explain(exc)) from None
        return {k: getattr(parsed, k) for k in fields}

    is_async = inspect.iscoroutinefunction(fn)

    async def run(arguments: JSON, context: ToolContext) -> Any:
        kwargs = dict(arguments)
        if context_param is not None:
            kwargs[context_param] = context
        if is_async:
            return await fn(**kwargs)
        return await asyncio.to_thread(functools.partial(fn, **kwargs))

    return Tool(
        name=name or fn.__name__,
        description=description or summary or fn.__name__,
        parameters=schema,
        run=run,
        validate=validate,
        category=category,
        risk=risk,
        idempotent=idempotent,
        timeout=timeout,
        available=available,
        family=family,
        untrusted=untrusted,
        writes_memory=writes_memory,
    )


def _arguments_model(
    fn: Callable[..., Any], arg_docs: dict[str, str]
) -> tuple[type[pydantic.BaseModel], str | None]:
    """A pydantic model of ``fn``'s arguments, and the name of its ``ToolContext``
    parameter (left out of the model), if it has one."""
    hints = get_type_hints(fn)
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for pname, param in inspect.signature(fn).parameters.items():
        annotation = hints.get(pname, Any)
        if annotation is ToolContext:
            context_param = pname
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {fn.__name__!r}: *args and **kwargs are not supported")
        default = ... if param.default is param.empty else param.default
        fields[pname] = (
            annotation,
            pydantic.Field(default, description=arg_docs.get(pname)),
        )
    model = pydantic.create_model(
        f"{fn.__name__}_arguments",
        __config__=pydantic.ConfigDict(extra="forbid"),
        **fields,
    )
    return model, context_param


def _explain(exc: pydantic.ValidationError) -> str:
    problems = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        problems.append(f"{where}: {error['msg']}")
    return "invalid arguments: " + "; ".join(problems)
