"""Tools: what a model may call.

A ``Tool`` is a name, a JSON schema, a category, a risk, a deadline and an async ``run``.
``validate`` checks arguments against the schema before ``run`` ever sees them. The
registry of tools and the catalog a turn offers are in ``tools.registry``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from ostinato.messages import JSON
from ostinato.models.base import ToolDefinition

Category: TypeAlias = Literal["read", "action", "ui", "agent"]
Risk: TypeAlias = Literal["safe", "write", "exec", "network"]


@dataclass(slots=True)
class ToolContext:
    """What a running tool may know about the turn it runs in.

    ``workdir`` is the conversation's working directory (file and shell tools are jailed
    to it); ``progress`` reports a line of progress to the surfaces watching; a tool
    stopped before it ends (its turn cancelled) may tell ``cut_short`` what it had done
    so far (a command's output), which its result then carries.
    """

    conversation_id: str
    turn_id: str
    run_id: str
    tool_use_id: str
    owner: str | None = None
    workdir: Path | None = None
    progress: Callable[[str], None] | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    cut_short: Callable[[str], None] | None = None


Runner: TypeAlias = Callable[[JSON, ToolContext], Awaitable[Any]]
Validator: TypeAlias = Callable[[JSON], JSON]


def _accept(arguments: JSON) -> JSON:
    return arguments


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    parameters: JSON
    run: Runner
    validate: Validator = _accept
    category: Category = "action"
    risk: Risk = "safe"
    idempotent: bool = True
    timeout: float = 30.0
    available: Callable[[], bool] | None = None
    # The tool's notion of a family of calls, for remembered approvals (e.g. a shell
    # command's program name); None when a call belongs to no family a grant may cover.
    family: Callable[[JSON], str | None] | None = None
    # Its results carry content from outside the conversation (web pages, files, other
    # programs and services, other agents): after one, memory writes in the turn ask.
    untrusted: bool = False
    # It writes long-term memory that later turns read (``remember``, ``forget``).
    writes_memory: bool = False
    # Whether an anonymous caller's turn may run it (``identity.owners.is_anonymous``):
    # None decides by risk (only ``safe`` tools run without an account).
    needs_account: bool | None = None
    # Whether a call changes anything (None: every call may): a call that does not runs
    # without asking whatever the risk (``manage_tools`` listing, say).
    changes: Callable[[JSON], bool] | None = None
    # Its ``validate`` checks against a schema from outside (a caller's, a model's, a
    # remote server's: ``ostinato.bounded.schemas``): the loop runs it off the event loop.
    bounded_check: bool = False
    # What a model is told about it: made once (a catalog reads every tool's each turn).
    definition: ToolDefinition = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        definition = ToolDefinition(self.name, self.description, self.parameters)
        object.__setattr__(self, "definition", definition)

    @property
    def account_only(self) -> bool:
        return self.needs_account if self.needs_account is not None else self.risk != "safe"
