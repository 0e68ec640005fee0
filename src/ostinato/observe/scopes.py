"""Scopes: the pieces of work that are observed, nested as they happen.

A turn (``TurnScope``) holds its steps (``StepScope``), model calls (``CallScope``), tool
calls (``ToolScope``) and operations (``OpScope``: routing, compaction, an approval's
wait); a sub-agent's turn nests inside the tool call that runs it; work after a turn (fact
extraction) is a ``BackgroundScope`` of its own, linked to the turn. The scope of the work
under way is the context variable ``CURRENT``, so a model call made anywhere under a turn
(the router's classifier, a compaction summary, a sub-agent's call) knows where it belongs
without being told: asyncio copies the variable into every task a turn starts.

When a model or tool call ends, every ledger above it records it (its own turn's, and the
parent turn's when it ran inside a sub-agent), and the installed backend hears of every
start and end (``observe.backend``) but two: a step's (a step is read from its turn: its
number and its times in the ledger) and a model call's start (it is told once, when the
call has ended, with its start time). A model call is never made current: nothing nests
in it, so it costs no context switch. A ``JobScope`` is background work outside any turn
(a schedule's firing): a trace of its own for a conversation.

What nothing will read is not made (``backend.DETAILED``): with no backend installed and
timelines off, a turn records no steps and a tool call is not made current (a sub-agent's
calls then go on its parent turn's ledger directly, without the tool call's id, which only
the timeline and the spans show), so a step costs the metrics block's two entries and
little else (``observe.counted``). The scopes a step makes set their fields without the
base class's ``__init__``, and each is ended by the one call that gives its answer
(``CallScope.replied``, ``ToolScope.ran``): they run for every step. Every call's scope is
recorded by ``record``, whose first case is the common one (a turn's own call): the
scopes' ``end`` does that one itself, without the call.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar, Token
from time import perf_counter
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ostinato.observe import backend as _backend
from ostinato.observe.ledger import TurnLedger

if TYPE_CHECKING:
    from ostinato.messages import JSON, Message
    from ostinato.models.base import ModelRequest, StopReason, Usage
    from ostinato.models.reply import ModelReply

CURRENT: ContextVar[Scope | None] = ContextVar("ostinato_observed_scope", default=None)


def error_name(exc: BaseException) -> str:
    """A short, low-cardinality name for how work failed: an ostinato error's code,
    ``cancelled``, ``timeout``, else the exception's type."""
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    code = getattr(exc, "code", None)
    if isinstance(code, str) and code:
        return code
    if isinstance(exc, TimeoutError):
        return "timeout"
    return type(exc).__name__


class Scope:
    """One piece of work: when it started and ended (``time.perf_counter``), how it
    failed, and the backend's own object for it (``handle``)."""

    __slots__ = ("_token", "ended", "error", "handle", "parent", "started")
    kind = "scope"

    def __init__(self, parent: Scope | None) -> None:
        self.parent = parent
        self.started = perf_counter()
        self.ended: float | None = None
        self.error: str | None = None
        self.handle: Any = None
        self._token: Token[Scope | None] | None = None

    @property
    def duration(self) -> float:
        return (self.ended if self.ended is not None else perf_counter()) - self.started

    def holder(self) -> Holder | None:
        """The nearest turn (or background work) this scope is part of."""
        node = self.parent
        while node is not None and not isinstance(node, Holder):
            node = node.parent
        return node

    def __enter__(self) -> Any:
        if _backend.HEARING:
            _backend.INSTALLED.started(self)
        self._token = CURRENT.set(self)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._token is not None:
            CURRENT.reset(self._token)
            self._token = None
        if exc is not None and self.error is None:
            self.error = error_name(exc)
        self.end()

    def end(self) -> None:
        if self.ended is not None:
            return
        self.ended = perf_counter()
        if _backend.HEARING:
            _backend.INSTALLED.ended(self)


class Holder(Scope):
    """A scope with a ledger: a turn, or background work. It names the conversation,
    the run and the owner that every scope under it belongs to."""

    __slots__ = ("conversation_id", "ledger", "owner", "run_id", "tags", "turn_id")

    def __init__(
        self,
        parent: Scope | None,
        conversation_id: str,
        run_id: str,
        turn_id: str,
        owner: str | None,
    ) -> None:
        super().__init__(parent)
        self.conversation_id, self.run_id, self.turn_id = conversation_id, run_id, turn_id
        self.owner = owner
        self.ledger = TurnLedger(self.started, _backend.TIMELINES)
        self.tags: Any = None  # what a backend's objects for its work share, made once


class TurnScope(Holder):
    """A turn: begun by the runtime before it routes the message, adopted by the turn's
    driver (which names its agent and model), finished with the stop reason."""

    __slots__ = (
        "adopted",
        "agent",
        "model",
        "route",
        "step",
        "stop_reason",
        "timed",
        "turn_kind",
        "version",
    )
    kind = "turn"

    def __init__(self, parent: Scope | None, turn: Any, owner: str | None) -> None:
        super().__init__(parent, turn.conversation_id, turn.run_id, turn.id, owner)
        self.turn_kind: str = turn.kind
        self.agent: str | None = None
        self.version: int | None = None  # the agent's version (``ostinato.pinning``)
        self.model: str | None = None
        self.route: dict[str, Any] | None = None  # the routing its metrics block records
        self.adopted = False
        self.stop_reason: str | None = None
        self.step: StepScope | None = None
        self.timed = _backend.DETAILED  # its steps are recorded (something reads them)

    def attach(self) -> Token[Scope | None]:
        """Make the turn the current scope (``detach`` with the token undoes it)."""
        return CURRENT.set(self)

    def detach(self, token: Token[Scope | None]) -> None:
        CURRENT.reset(token)

    def next_step(self) -> None:
        """A step begins (a model call and the tool calls it asks for); the last ends.
        Nothing is recorded when nothing will read it (``timed``)."""
        if not self.timed:
            return
        steps = self.ledger.steps
        now = perf_counter()
        if self.step is not None and self.step.ended is None:
            self.step.ended = now
        self.step = StepScope(self, len(steps) + 1, now)
        steps.append(self.step)

    def settle(self) -> None:
        """The turn is ending: its last step ends and its ledger stops the clock."""
        if self.step is not None:
            self.step.end()
        self.ledger.close()

    def finish(self, stop_reason: str) -> None:
        self.settle()
        self.stop_reason = stop_reason
        self.end()

    def abandon(self, exc: BaseException) -> None:
        """The turn could not begin (its driver never took it): end it as failed."""
        if not self.adopted and self.ended is None:
            self.error = error_name(exc)
            self.stop_reason = "failed"
            self.ledger.close()
            self.end()


class BackgroundScope(Holder):
    """Work after a turn (fact extraction): its own trace, linked to the turn."""

    __slots__ = ("link", "name")
    kind = "background"

    def __init__(self, name: str, link: Holder | None) -> None:
        super().__init__(
            None,
            link.conversation_id if link else "",
            link.run_id if link else "",
            link.turn_id if link else "",
            link.owner if link else None,
        )
        self.name = name
        self.link = link


class JobScope(Holder):
    """Background work outside any turn (a schedule's firing, for its conversation; an
    owner's idle-time job, for none: ``conversation_id`` is then empty): a trace of its
    own. ``attributes`` describe it (low-cardinality values: a schedule's id and mode)
    and ``note`` adds to them; each turn it started (``caused``) is a trace of its own,
    which the job's links to."""

    __slots__ = ("attributes", "name", "turns")
    kind = "job"

    def __init__(
        self, name: str, conversation_id: str, owner: str | None, attributes: dict[str, Any]
    ) -> None:
        super().__init__(None, conversation_id, "", "", owner)
        self.name, self.attributes = name, attributes
        self.turns: list[tuple[str, str]] = []  # (turn id, run id) of each turn it started

    def note(self, **attributes: Any) -> None:
        self.attributes.update(attributes)

    def caused(self, turn: Any) -> None:
        """The job started ``turn`` (a ``store.base.Turn``: its ``id`` and ``run_id``)."""
        self.turns.append((turn.id, turn.run_id))


class StepScope(Scope):
    """A step of a turn: its number and times. No backend hears of it (its calls carry
    its number; the metrics read its times from the turn's ledger when the turn ends)."""

    __slots__ = ("index",)
    kind = "step"

    def __init__(self, turn: TurnScope, index: int, started: float) -> None:
        self.parent, self.started, self.index = turn, started, index
        self.ended: float | None = None
        self.error: str | None = None
        self.handle: Any = None
        self._token = None

    def end(self) -> None:
        if self.ended is None:
            self.ended = perf_counter()


class CallScope(Scope):
    """One model call (``observe.model_call``), under the current scope: its purpose
    (``step``, ``wrap_up``, ``router``, ``summary``, ``extraction``), its model, when its
    first content came, what it answered. It ends with ``replied`` (or ``failed``); used
    as a context manager, it also ends when the block does."""

    __slots__ = (
        "first",
        "model",
        "purpose",
        "reply",
        "request",
        "retries",
        "stop_reason",
        "usage",
    )
    kind = "model_call"

    def __init__(self, model: str, request: ModelRequest | None, purpose: str) -> None:
        # ``Scope.__init__``'s fields set here: one call less for every step
        self.parent, self.started = CURRENT.get(), perf_counter()
        self.ended: float | None = None
        self.error: str | None = None
        self.handle: Any = None
        self._token = None
        self.model, self.purpose = model, purpose
        self.request: ModelRequest | None = request
        self.first: float | None = None
        self.retries: tuple[str, ...] = ()  # each retried attempt's cause (rare: no list)
        self.usage: Usage | None = None
        self.stop_reason: StopReason | None = None
        self.reply: Message | None = None

    @property
    def time_to_first_token(self) -> float | None:
        return self.first - self.started if self.first is not None else None

    def __enter__(self) -> CallScope:
        return self  # never current (nothing nests in it); the backend hears of it at its end

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self.failed(exc)
        else:
            self.end()

    def first_token(self) -> None:
        if self.first is None:
            self.first = perf_counter()

    def retried(self, error: str) -> None:
        """An attempt failed and is retried (``error`` is ``code: message``); the time
        to the first token counts from the call's start to the attempt that answers."""
        cause = error.split(":", 1)[0].strip() or "unknown"
        self.retries = (*self.retries, cause)
        self.first = None
        if _backend.HEARING:
            _backend.INSTALLED.retried(self, cause)

    def replied(self, reply: ModelReply) -> None:
        """The call answered ``reply``: it ends."""
        self.usage, self.stop_reason, self.reply = reply.usage, reply.stop_reason, reply.message
        self.end()

    def failed(self, exc: BaseException) -> None:
        """The call failed with ``exc`` (its name is the scope's ``error``): it ends."""
        if self.error is None:
            self.error = error_name(exc)
        self.end()

    def end(self) -> None:
        """Every ledger above records the call, then the backend hears of it."""
        if self.ended is not None:
            return
        self.ended = perf_counter()
        own = self.parent
        if type(own) is TurnScope and own.parent is None:  # ``record``'s first case, here
            own.ledger.calls.append((self, None, None))
        else:
            record(self)
        if _backend.HEARING:
            _backend.INSTALLED.ended(self)
        self.request = None  # the history is not kept past the call
        self.reply = None


class ToolScope(Scope):
    """One tool call (``observe.tool_call``), under the current scope: its id and name,
    how it ended, and any approval it waited for. It is the current scope from when it is
    made until it ends with ``ran`` (or ``failed``), so what the tool does nests in it
    (an approval's wait, a sub-agent's turn), when something reads that
    (``backend.DETAILED``). Used as a context manager, it also ends when the block does."""

    __slots__ = ("approval", "arguments", "call_id", "name", "result", "status", "waited")
    kind = "tool_call"

    def __init__(self, call_id: str, name: str, arguments: JSON) -> None:
        # ``Scope.__init__``'s fields set here, as ``CallScope`` does
        self.parent, self.started = CURRENT.get(), perf_counter()
        self.ended: float | None = None
        self.error: str | None = None
        self.handle: Any = None
        self.call_id, self.name, self.arguments = call_id, name, arguments
        self.status: str | None = None
        self.result: str | None = None
        self.approval: str | None = None  # the approval's ending
        self.waited: float | None = None  # seconds waiting for it
        self._token: Token[Scope | None] | None = None
        if _backend.DETAILED:
            if _backend.HEARING:
                _backend.INSTALLED.started(self)
            self._token = CURRENT.set(self)

    def __enter__(self) -> ToolScope:
        return self  # current already (``__init__``)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self.failed(exc)
        else:
            self.end()

    def ran(self, status: str, content: str) -> None:
        """The tool ran and answered ``content`` with ``status``: the call ends."""
        self.status = status
        if status not in ("ok", "waiting"):
            self.error = status
        self.result = content
        self.end()

    def failed(self, exc: BaseException) -> None:
        """The call raised ``exc`` (its name is the scope's ``error``): it ends."""
        if self.error is None:
            self.error = error_name(exc)
        self.end()

    def end(self) -> None:
        """No longer current; every ledger above records it, then the backend hears."""
        if self._token is not None:
            CURRENT.reset(self._token)
            self._token = None
        if self.ended is not None:
            return
        self.ended = perf_counter()
        own = self.parent
        if type(own) is TurnScope and own.parent is None:  # ``record``'s first case, here
            own.ledger.tools.append((self, None, None))
        else:
            record(self)
        if _backend.HEARING:
            _backend.INSTALLED.ended(self)
        self.result = None


class OpScope(Scope):
    """An operation of the loop: ``route``, ``compaction``, ``approval``."""

    __slots__ = ("attributes", "name")
    kind = "operation"

    def __init__(self, parent: Scope | None, name: str, attributes: dict[str, Any]) -> None:
        super().__init__(parent)
        self.name, self.attributes = name, attributes

    def note(self, **attributes: Any) -> None:
        self.attributes.update(attributes)


class ApprovalScope(OpScope):
    """A tool call's wait for a person; its ending and wait go on the tool call too."""

    __slots__ = ()

    def ending(self, ending: str) -> None:
        self.attributes["ending"] = ending

    def end(self) -> None:
        if self.ended is not None:
            return
        super().end()
        if isinstance(self.parent, ToolScope):
            self.parent.approval = self.attributes.get("ending", self.error)
            self.parent.waited = self.duration


def record(scope: CallScope | ToolScope) -> None:
    """Every ledger above the scope records it: its own turn's directly, each one
    further up as nested work, under the tool call of that turn it ran in."""
    own = scope.parent
    call = scope.kind == "model_call"
    if type(own) is TurnScope and own.parent is None:  # most calls: a turn's own, alone
        (own.ledger.calls if call else own.ledger.tools).append((scope, None, None))
        return
    while own is not None and not isinstance(own, Holder):
        own = own.parent
    if own is None:
        if _backend.HEARING:
            _backend.INSTALLED.unheld(scope)
        return
    (own.ledger.calls if call else own.ledger.tools).append((scope, None, None))
    if own.parent is None:
        return  # nothing above it (a turn's own call, most of the time)
    agent = own.agent if isinstance(own, TurnScope) else None
    node: Scope | None = own.parent
    while node is not None:
        under = None
        while node is not None and not isinstance(node, Holder):
            if isinstance(node, ToolScope):
                under = node.call_id
            node = node.parent
        if node is None:
            return
        (node.ledger.calls if call else node.ledger.tools).append((scope, agent, under))
        node = node.parent
