"""Forging a tool: checking what a person or a model submits, trying it once in the
sandbox, storing it as a new version, and turning a stored version into a ``Tool``.

Shared by the model's ``create_tool`` (``tools.forge.tools``) and ``/v1/tools/forged``,
so both refuse the same things with the same sentences.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from ostinato.bounded import off_loop
from ostinato.bounded.schemas import compile_schema
from ostinato.bounded.work import CHECK_SECONDS
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


def _check(name: str, description: str, parameters: Any, code: str, example: Any) -> JSON:
    """Everything but the trial run; returns the example arguments to try. Checking the
    example against the schema is work whose cost the caller chooses: ``forge`` runs
    this off the event loop, under a time budget."""
    check_name(name)
    if not description.strip() or len(description) > DESCRIPTION_LIMIT:
        raise InvalidRequest(f"a description of 1 to {DESCRIPTION_LIMIT:,} characters is needed")
    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        raise InvalidRequest('parameters must be a JSON schema with "type": "object"')
    schema = compile_schema(parameters, where="parameters")
    try:
        check_code_size(code)
    except SandboxError as exc:
        raise InvalidRequest(exc.message) from None
    example = {} if example is None else example
    if not isinstance(example, dict):
        raise InvalidRequest("example must be an arguments object")
    errors = schema.errors(example)
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
    arguments = await off_loop(
        _check, name, description, parameters, code, example, seconds=2 * CHECK_SECONDS + 1
    )
    try:
        result = await sandbox.run(code, arguments, network=uses_network(code), owner=owner)
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
    mounted it keeps it, whatever is saved meanwhile. Its schema is compiled when first
    needed, by a check the loop runs off the event loop (``bounded_check``)."""
    network = uses_network(forged.code)
    compiled = functools.cache(lambda: compile_schema(forged.parameters, where="parameters"))

    def validate(arguments: JSON) -> JSON:
        try:
            errors = compiled().errors(arguments)
        except InvalidRequest as exc:
            raise ToolArgumentsInvalid(
                f"invalid arguments for {forged.tool_name}: {exc.message}"
            ) from None
        if errors:
            raise ToolArgumentsInvalid(
                f"invalid arguments for {forged.tool_name}: {errors[0].message}"
            )
        return arguments

    async def run(arguments: JSON, context: ToolContext) -> Any:
        return await sandbox.run(forged.code, arguments, network=network, owner=forged.owner)

    return Tool(
        name=forged.tool_name,
        description=f"{forged.description} (a tool you made, version {forged.version})",
        parameters=forged.parameters,
        run=run,
        validate=validate,
        bounded_check=True,
        category="action",
        risk="network" if network else "safe",
        idempotent=not network,
        untrusted=network,  # what its fetch read comes from outside the conversation
        timeout=sandbox.limits.wall_s + 10.0,
    )
