"""Forging a tool: checking what a person or a model submits, trying it once in the
sandbox, storing it as a new version, and turning a stored version into a ``Tool``.

Shared by the model's ``create_tool`` (``tools.forge.tools``) and ``/v1/tools/forged``,
so both refuse the same things with the same sentences.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ostinato.errors import InvalidRequest, ToolArgumentsInvalid
from ostinato.messages import JSON
from ostinato.store.base import Store
from ostinato.store.forged import (
    DESCRIPTION_LIMIT,
    ForgedTool,
    RemoveForgedTool,
    SaveForgedTool,
    check_name,
)
from ostinato.tools.base import Tool, ToolContext
from ostinato.tools.forge.limits import SandboxError, check_code_size
from ostinato.tools.forge.pool import Sandbox

_FETCH = re.compile(r"\bfetch\b")


def uses_network(code: str) -> bool:
    """Whether the code names ``fetch``: only then is ``fetch`` installed for its runs
    (and the tool's risk is ``network``). Code that does not name it has no way out."""
    return bool(_FETCH.search(code))


@dataclass(frozen=True, slots=True)
class Forged:
    """A stored version, and what its trial run with ``example`` returned."""

    tool: ForgedTool
    example: JSON
    result: Any


def check_parameters(parameters: Any) -> JSON:
    """The arguments' schema: a JSON schema of an object; ``InvalidRequest`` otherwise."""
    import jsonschema  # loaded by the first forged tool, not by the server's import

    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        raise InvalidRequest('parameters must be a JSON schema with "type": "object"')
    try:
        jsonschema.Draft202012Validator.check_schema(parameters)
    except jsonschema.SchemaError as exc:
        raise InvalidRequest(f"parameters is not a valid JSON schema: {exc.message}") from None
    return parameters


def _check(name: str, description: str, parameters: Any, code: str, example: Any) -> JSON:
    """Everything but the trial run; returns the example arguments to try."""
    check_name(name)
    if not description.strip() or len(description) > DESCRIPTION_LIMIT:
        raise InvalidRequest(f"a description of 1 to {DESCRIPTION_LIMIT:,} characters is needed")
    schema = check_parameters(parameters)
    try:
        check_code_size(code)
    except SandboxError as exc:
        raise InvalidRequest(exc.message) from None
    example = {} if example is None else example
    if not isinstance(example, dict):
        raise InvalidRequest("example must be an arguments object")
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(example), key=str)
    if errors:
        raise InvalidRequest(f"example does not match parameters: {errors[0].message}")
    return example


async def forge(
    store: Store,
    sandbox: Sandbox,
    owner: str,
    *,
    name: str,
    description: str,
    parameters: Any,
    code: str,
    example: Any = None,
    conversation_id: str | None = None,
) -> Forged:
    """Check, try once with ``example`` (``{}`` when none), store as the next version.
    ``InvalidRequest`` when any of it is wrong, the trial passes a limit, or the code
    throws on the example."""
    arguments = _check(name, description, parameters, code, example)
    try:
        result = await sandbox.run(code, arguments, network=uses_network(code))
    except SandboxError as exc:
        raise InvalidRequest(f"the code failed its trial run: {exc.message}") from None
    op = SaveForgedTool(
        owner, check_name(name), description.strip(), parameters, code, conversation_id
    )
    (stored,) = await store.write(op)
    assert isinstance(stored, ForgedTool)
    return Forged(stored, arguments, result)


async def remove(store: Store, owner: str, name: str) -> ForgedTool:
    """Mark the tool removed (its versions stay); ``NotFound`` when there is none."""
    (removed,) = await store.write(RemoveForgedTool(owner, check_name(name)))
    assert isinstance(removed, ForgedTool)
    return removed


def as_tool(forged: ForgedTool, sandbox: Sandbox) -> Tool:
    """A stored version as the ``my_<name>`` tool a turn offers: its arguments validated
    against its schema, its code run in the sandbox. The version is fixed: a turn that
    mounted it keeps it, whatever is saved meanwhile."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(forged.parameters)
    network = uses_network(forged.code)

    def validate(arguments: JSON) -> JSON:
        errors = sorted(validator.iter_errors(arguments), key=str)
        if errors:
            raise ToolArgumentsInvalid(
                f"invalid arguments for {forged.tool_name}: {errors[0].message}"
            )
        return arguments

    async def run(arguments: JSON, context: ToolContext) -> Any:
        return await sandbox.run(forged.code, arguments, network=network)

    return Tool(
        name=forged.tool_name,
        description=f"{forged.description} (a tool you made, version {forged.version})",
        parameters=forged.parameters,
        run=run,
        validate=validate,
        category="action",
        risk="network" if network else "safe",
        idempotent=not network,
        timeout=sandbox.limits.wall_s + 10.0,
    )
