"""Backends: what is done with the observed work besides the turns' own ledgers.

``Backend`` does nothing, and it is what is installed until ``install`` is called (the
hooks then skip it). OpenTelemetry traces
(``observe.otel``) and Prometheus metrics (``observe.prometheus``) are backends; with
both switched on, ``Fanout`` calls each in turn, each only with the kinds of scope it
says it hears (``starts``, ``ends``). ``INSTALLED`` is read at every hook, so installing
takes effect from the next piece of work; ``HEARING`` says whether anything but the no-op
backend is installed, so a hook with nothing to tell skips even the no-op call.

``TIMELINES`` says whether turns keep their timelines (``keep_timelines``; on by
default). ``DETAILED`` is either of the two: a turn records its steps, and a tool call is
made the current scope (so what runs in it nests under it), only when something will
read them; with nothing installed and timelines off, the scopes do no more than the
metrics block needs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

# The hooks take the scopes of ``observe.scopes`` (``Scope``; ``CallScope``, ``ToolScope``),
# typed ``Any`` here because that module reads what this one installs: an implementation
# names the precise types (``otel``, ``prometheus``).
Scope: TypeAlias = Any
CallScope: TypeAlias = Any
ToolScope: TypeAlias = Any

KINDS = ("turn", "model_call", "tool_call", "operation", "background", "job")


class Backend:
    """The no-op backend; implementations override the hooks they need."""

    capture_content = False  # whether prompts, replies and tool arguments are wanted
    # the kinds of scope (``Scope.kind``) whose start and end it needs to hear (None:
    # every kind); a ``Fanout`` calls it with those only (installed alone, with all)
    starts: frozenset[str] | None = None
    ends: frozenset[str] | None = None

    def started(self, scope: Scope) -> None:
        """Work began (not said of a model call or a step); a backend may keep its own
        object in ``scope.handle``."""

    def described(self, scope: Scope) -> None:
        """A turn learned its agent and model after it began (they are routed first)."""

    def ended(self, scope: Scope) -> None:
        """Work ended (``scope.error`` says how, when it failed); not said of a step (its
        turn's ledger has its times when the turn ends)."""

    def unheld(self, scope: CallScope | ToolScope) -> None:
        """A model or tool call that no turn or job holds ended (no ledger has it)."""

    def retried(self, scope: CallScope, cause: str) -> None:
        """A model call's attempt failed and is retried; ``cause`` is the error's code."""

    def queued(self, delta: int) -> None:
        """Messages waiting in a conversation's queue: ``delta`` more (or fewer)."""

    def streams(self, delta: int) -> None:
        """Open event streams and WebSockets: ``delta`` more (or fewer)."""

    def store_write(self, seconds: float) -> None:
        """One store write committed in ``seconds``."""

    def shutdown(self) -> None:
        """Flush what is buffered (spans not yet exported); the process is stopping."""


class Fanout(Backend):
    """Several backends, each told everything in the order given."""

    def __init__(self, backends: Sequence[Backend]) -> None:
        self.backends = tuple(backends)
        self.capture_content = any(b.capture_content for b in backends)
        self._starts = {k: tuple(b for b in backends if _hears(b.starts, k)) for k in KINDS}
        self._ends = {k: tuple(b for b in backends if _hears(b.ends, k)) for k in KINDS}

    def started(self, scope: Scope) -> None:
        for backend in self._starts.get(scope.kind, self.backends):
            backend.started(scope)

    def described(self, scope: Scope) -> None:
        for backend in self.backends:
            backend.described(scope)

    def ended(self, scope: Scope) -> None:
        for backend in self._ends.get(scope.kind, self.backends):
            backend.ended(scope)

    def unheld(self, scope: CallScope | ToolScope) -> None:
        for backend in self.backends:
            backend.unheld(scope)

    def retried(self, scope: CallScope, cause: str) -> None:
        for backend in self.backends:
            backend.retried(scope, cause)

    def queued(self, delta: int) -> None:
        for backend in self.backends:
            backend.queued(delta)

    def streams(self, delta: int) -> None:
        for backend in self.backends:
            backend.streams(delta)

    def store_write(self, seconds: float) -> None:
        for backend in self.backends:
            backend.store_write(seconds)

    def shutdown(self) -> None:
        for backend in self.backends:
            backend.shutdown()


def _hears(kinds: frozenset[str] | None, kind: str) -> bool:
    return kinds is None or kind in kinds


NOOP = Backend()
INSTALLED: Backend = NOOP
HEARING = False  # INSTALLED is not NOOP
TIMELINES = True  # turns keep their timelines
DETAILED = True  # HEARING or TIMELINES
_watchers: list[Callable[[], None]] = []  # told when DETAILED may have changed


def on_change(watcher: Callable[[], None]) -> None:
    """Call ``watcher`` now and whenever a backend is installed or timelines are switched
    (``observe`` binds its call scopes to what is wanted)."""
    _watchers.append(watcher)
    watcher()


def _changed() -> None:
    global DETAILED
    DETAILED = HEARING or TIMELINES
    for watcher in _watchers:
        watcher()


def install(backend: Backend | Sequence[Backend] | None) -> Backend:
    """Install ``backend`` (several: a ``Fanout``; ``None`` or none: the no-op one);
    returns the one it replaced."""
    global INSTALLED, HEARING
    previous = INSTALLED
    if backend is None:
        INSTALLED = NOOP
    elif isinstance(backend, Backend):
        INSTALLED = backend
    else:
        found = list(backend)
        INSTALLED = NOOP if not found else found[0] if len(found) == 1 else Fanout(found)
    HEARING = INSTALLED is not NOOP
    _changed()
    return previous


def keep_timelines(on: bool) -> bool:
    """Whether turns keep their timelines (``observability.timeline``), from the next
    turn; returns what it was."""
    global TIMELINES
    previous, TIMELINES = TIMELINES, on
    _changed()
    return previous


def installed() -> Backend:
    return INSTALLED
