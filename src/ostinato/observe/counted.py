"""Calls as the metrics block counts them, when nothing else reads a call.

With no backend installed and timelines off (``backend.DETAILED`` false), the metrics
block is the only reader of a model or tool call: it needs a model call's model, purpose
and token counts, and a tool call's name. ``observe.model_call`` and ``observe.tool_call``
are then ``CountedCall`` and ``CountedTool``: scopes that set only those (no clock read,
no time to first token, never the current scope) and are recorded as the full ones are,
in every ledger above them. What they do not keep reads as nothing (class attributes in
place of the slots they leave unset: a start and end of 0.0, no error, no retries); a
timeline made for a turn that began before timelines were switched off leaves them out
(``TurnLedger.timeline``: a call with no start time), and its block counts them.

``observe`` binds the two names to these or to ``CallScope`` and ``ToolScope`` whenever
a backend is installed or timelines are switched (``backend.on_change``): the loop looks
them up at each call, so the choice costs a call nothing.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from ostinato.observe import scopes
from ostinato.observe.scopes import CURRENT, CallScope, ToolScope

if TYPE_CHECKING:
    from ostinato.messages import JSON
    from ostinato.models.base import ModelRequest
    from ostinato.models.reply import ModelReply


class _Counted:
    """How a counted call ends: once, recorded in every ledger above it, told to no
    backend (none is installed while these are bound). ``done`` is each class's slot."""

    __slots__ = ()
    done: bool

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.end()

    def failed(self, exc: BaseException) -> None:
        self.end()  # counted, with no token counts

    def end(self) -> None:
        if self.done:
            return
        self.done = True  # type: ignore[misc]  # the slot is each subclass's (a layout of its own)
        scopes.record(cast("CallScope | ToolScope", self))


class CountedCall(_Counted, CallScope):
    """A model call counted for the block: its model, purpose and token counts."""

    __slots__ = ("done",)
    # read, never written, here (the full scope's slots that this one leaves unset)
    started = ended = first = 0.0  # ``first`` set: the stream's first content is not timed
    error = handle = request = reply = stop_reason = _token = None
    retries: tuple[str, ...] = ()

    def __init__(self, model: str, request: ModelRequest | None, purpose: str) -> None:
        self.parent, self.model, self.purpose = CURRENT.get(), model, purpose
        self.usage = None
        self.done = False

    def retried(self, error: str) -> None:
        """Nothing reads retries here."""

    def replied(self, reply: ModelReply) -> None:
        self.usage = reply.usage
        self.end()


class CountedTool(_Counted, ToolScope):
    """A tool call counted for the block: its name (never the current scope)."""

    __slots__ = ("done",)
    started = ended = 0.0  # read, never written, here (as ``CountedCall``'s)
    error = handle = status = result = approval = waited = _token = None
    call_id = ""
    arguments: Any = None

    def __init__(self, call_id: str, name: str, arguments: JSON) -> None:
        self.parent, self.name = CURRENT.get(), name
        self.done = False

    def ran(self, status: str, content: str) -> None:
        self.end()
