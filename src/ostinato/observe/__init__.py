"""Observation: the seam the runtime, the loop and the models report their work through.

The code that does the work calls only the functions below; they build **scopes**
(``observe.scopes``: a turn, a step, a model call, a tool call, an operation, background
work, a job), which every turn's ledger (``observe.ledger``: its metrics block and timeline)
records, and which the installed **backend** (``observe.backend``) hears about. No backend
is installed by default: a hook then returns at once (``backend.HEARING``), and no vendor
library is imported; with timelines off too (``keep_timelines``), the scopes make only
what the metrics block needs. ``observe.setup`` installs OpenTelemetry traces (``observe.otel``)
and Prometheus metrics (``observe.prometheus``) when the settings and the environment
ask for them; ``observe.logs`` formats the logs (plain or JSON lines).

The import list below is the public API.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ostinato.observe import backend as _backend
from ostinato.observe.backend import Backend, Fanout, install, installed, keep_timelines
from ostinato.observe.counted import CountedCall, CountedTool
from ostinato.observe.ledger import TurnLedger
from ostinato.observe.scopes import (
    CURRENT,
    ApprovalScope,
    BackgroundScope,
    CallScope,
    Holder,
    JobScope,
    OpScope,
    Scope,
    StepScope,
    ToolScope,
    TurnScope,
    error_name,
)

if TYPE_CHECKING:
    from ostinato.store.base import Turn

__all__ = [
    "CURRENT",
    "ApprovalScope",
    "Backend",
    "BackgroundScope",
    "CallScope",
    "CountedCall",
    "CountedTool",
    "Fanout",
    "Holder",
    "JobScope",
    "OpScope",
    "Scope",
    "StepScope",
    "ToolScope",
    "TurnLedger",
    "TurnScope",
    "approval",
    "background",
    "caused",
    "current",
    "error_name",
    "install",
    "installed",
    "job",
    "keep_timelines",
    "model_call",
    "nearest_holder",
    "operation",
    "queued",
    "store_write",
    "streams",
    "tool_call",
    "turn_beginning",
    "turn_scope",
]


def current() -> Scope | None:
    return CURRENT.get()


def nearest_holder(scope: Scope | None = None) -> Holder | None:
    """The turn (or background work) that ``scope`` (default: the current one) is, or is
    part of."""
    scope = CURRENT.get() if scope is None else scope
    return scope if isinstance(scope, Holder) or scope is None else scope.holder()


@contextmanager
def turn_beginning(turn: Turn, *, owner: str | None) -> Iterator[TurnScope]:
    """A turn being begun by the runtime: current while its message is routed and its
    driver started (whose task inherits it). If it cannot begin, it ends as failed."""
    scope = TurnScope(None, turn, owner)
    if _backend.HEARING:
        _backend.INSTALLED.started(scope)
    token = scope.attach()
    try:
        yield scope
    except BaseException as exc:
        scope.abandon(exc)
        raise
    finally:
        scope.detach(token)


def turn_scope(
    turn: Turn, *, owner: str | None, agent: str, model: str, version: int | None = None
) -> TurnScope:
    """The scope of the turn a driver runs: the one the runtime began for it, else a new
    one under the current scope (a sub-agent's turn nests in the tool call running it);
    ``version``: the agent's version the turn runs (``ostinato.pinning``)."""
    found = CURRENT.get()
    fresh = not (isinstance(found, TurnScope) and found.turn_id == turn.id and not found.adopted)
    scope = TurnScope(found, turn, owner) if fresh else found
    assert isinstance(scope, TurnScope)
    scope.adopted, scope.agent, scope.model, scope.turn_kind = True, agent, model, turn.kind
    scope.version = version
    if _backend.HEARING:  # a backend hears of a new turn, or of what the found one is
        (_backend.INSTALLED.started if fresh else _backend.INSTALLED.described)(scope)
    return scope


# One model call under the current scope, ``observe.model_call(model, request, purpose)``
# (it ends with ``replied`` or ``failed``, or as a context manager), and one tool call,
# ``observe.tool_call(call_id, name, arguments)`` (it ends with ``ran`` or ``failed``):
# ``CallScope`` and ``ToolScope``, or, when only the metrics block reads calls, the
# ``CountedCall`` and ``CountedTool`` that keep what it needs (``observe.counted``).
model_call: type[CallScope] = CallScope
tool_call: type[ToolScope] = ToolScope


def _bind() -> None:
    global model_call, tool_call
    detailed = _backend.DETAILED
    model_call = CallScope if detailed else CountedCall
    tool_call = ToolScope if detailed else CountedTool


_backend.on_change(_bind)


def operation(name: str, **attributes: Any) -> OpScope:
    """An operation of the loop (``route``, ``compaction``), as a context manager."""
    return OpScope(CURRENT.get(), name, attributes)


def approval(tool: str) -> ApprovalScope:
    """A tool call waiting for a person's approval, as a context manager."""
    return ApprovalScope(CURRENT.get(), "approval", {"tool": tool})


def background(name: str) -> BackgroundScope:
    """Work done for a turn after it ended (a context manager): its own trace, linked to
    the turn current when it was started."""
    return BackgroundScope(name, nearest_holder())


def job(
    name: str, *, conversation_id: str | None = None, owner: str | None = None, **attributes: Any
) -> JobScope:
    """Background work outside any turn (a schedule's firing for a conversation, an
    owner's idle-time job), as a context manager: a trace of its own, its span named
    ``name`` with the conversation's id, the owner and ``attributes`` (low-cardinality
    values, as ``ostinato.<name>.<key>``; ``JobScope.note`` adds more). Model calls made
    in it are its own (its ``ledger``). The turns it starts are traces of their own:
    ``caused`` links them to it."""
    return JobScope(name, conversation_id or "", owner, attributes)


def caused(turn: Turn) -> None:
    """The work under way started ``turn`` (a turn it submitted has begun): the job it is
    part of, if any, links to the turn's trace."""
    scope = CURRENT.get()
    while scope is not None and not isinstance(scope, JobScope):
        scope = scope.parent
    if scope is not None:
        scope.caused(turn)


def queued(delta: int) -> None:
    if _backend.HEARING:
        _backend.INSTALLED.queued(delta)


def streams(delta: int) -> None:
    if _backend.HEARING:
        _backend.INSTALLED.streams(delta)


def store_write(seconds: float) -> None:
    """A store write committed in ``seconds`` (the SQL stores time each one)."""
    if _backend.HEARING:
        _backend.INSTALLED.store_write(seconds)
