"""Frames: the typed events every surface receives. Their names are public API.

Every frame has ``type``, ``run_id`` (the turn that emitted it) and ``seq``. ``seq`` is the
conversation's durable position: a ``message`` frame carries the seq of the row it
announces (and only it has an SSE ``id``); every other frame carries the seq of the last
row committed before it (``turn.started``, sent before the rows that begin its turn, carries
the seq just before them). So ``seq`` never decreases on a stream, and a client that sees
a ``message`` frame whose seq skips ahead knows it missed a row and can read
``/messages?after_seq=``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import ClassVar, Literal, TypeAlias

from ostinato.messages import JSON, Message, message_to_json
from ostinato.store.base import TurnStopReason


@dataclass(frozen=True, slots=True, kw_only=True)
class _Frame:
    run_id: str
    seq: int

    durable: ClassVar[bool] = False

    def to_json(self) -> JSON:
        names = _NAMES.get(type(self))
        if names is None:  # each class's field names, found once (``fields`` makes a tuple)
            names = _NAMES[type(self)] = tuple(f.name for f in fields(self))
        out: JSON = {}
        for name in names:
            value = getattr(self, name)
            out[name] = message_to_json(value) if isinstance(value, Message) else value
        return out


_NAMES: dict[type[_Frame], tuple[str, ...]] = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStarted(_Frame):
    """A turn began: ``kind`` user / resume (a card answered) / approval (a decision that
    outlived its turn) / background (it delivers background work: a scheduled prompt's
    result, an outside trigger); the skill, persona and tier the router chose.
    ``background_run_id`` is, for a ``background`` turn, the ``run_id`` of the work whose
    result it delivers (a scheduled prompt's stage one; a trigger's firing).
    ``agent_version`` is the version of the skill's agent the turn runs (``pin``ned to the
    conversation; null for an agent that is not versioned)."""

    turn_id: str
    kind: str = "user"
    skill: str | None = None
    persona: str | None = None
    tier: str | None = None
    agent_version: int | None = None
    background_run_id: str | None = None
    type: Literal["turn.started"] = "turn.started"


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageCommitted(_Frame):
    """A row was committed; ``message`` is the row as ``/messages`` returns it.
    ``background_run_id`` is set on a row background work wrote itself (a reminder: its
    ``run_id`` is that work's too)."""

    message: Message
    client_message_id: str | None = None
    background_run_id: str | None = None
    type: Literal["message"] = "message"
    durable: ClassVar[bool] = True

    @classmethod
    def of(cls, run_id: str, seq: int, row: Message) -> MessageCommitted:
        """The frame of a stored row, its sender's ``client_message_id`` echoed from a
        user row's metadata: the same frame whether it is sent live or read back."""
        echo = row.metadata.get("client_message_id") if row.role == "user" else None
        echo = echo if isinstance(echo, str) else None
        return cls(run_id=run_id, seq=seq, message=row, client_message_id=echo)


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDeltaFrame(_Frame):
    text: str
    type: Literal["text.delta"] = "text.delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingDeltaFrame(_Frame):
    text: str
    type: Literal["thinking.delta"] = "thinking.delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDiscarded(_Frame):
    """The text and thinking that ``text.delta`` / ``thinking.delta`` frames showed since
    the last ``message`` frame will not be stored: drop them. ``reason``: ``retry`` (the
    model call is tried again from the start) or ``failed`` (the turn failed)."""

    reason: str
    type: Literal["text.discarded"] = "text.discarded"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStarted(_Frame):
    tool_use_id: str
    name: str
    input: JSON
    category: str = "action"
    type: Literal["tool.started"] = "tool.started"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFinished(_Frame):
    tool_use_id: str
    name: str
    status: str  # "ok" | "error" | "timeout" | "interrupted" | "skipped"
    duration_s: float
    result: str
    type: Literal["tool.finished"] = "tool.finished"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolProgress(_Frame):
    """A long tool says what it is doing (or a heartbeat says it is still going)."""

    tool_use_id: str
    name: str
    text: str
    heartbeat: bool = False
    type: Literal["tool.progress"] = "tool.progress"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentToken(_Frame):
    """Text of a sub-agent (for a timeline, not the chat body); ``tool_use_id`` is the
    parent's ``delegate`` / ``spawn_agents`` call, ``agent`` which sub-agent."""

    agent: str
    tool_use_id: str
    text: str
    type: Literal["agent.token"] = "agent.token"


@dataclass(frozen=True, slots=True, kw_only=True)
class InputRequested(_Frame):
    """A question card: the turn paused until a person answers ``tool_use_id``."""

    tool_use_id: str
    name: str
    input: JSON
    type: Literal["input.requested"] = "input.requested"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequested(_Frame):
    approval_id: str
    tool_use_id: str
    tool: str
    input: JSON
    risk: str
    family: str | None = None
    expires_in_s: float | None = None
    type: Literal["approval.requested"] = "approval.requested"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecided(_Frame):
    approval_id: str
    tool_use_id: str
    ending: str
    decided_by: str | None = None
    type: Literal["approval.decided"] = "approval.decided"


@dataclass(frozen=True, slots=True, kw_only=True)
class InputQueued(_Frame):
    """A message arrived while a turn ran; it is stored and will run in its turn."""

    queued_id: str
    position: int
    client_message_id: str | None = None
    steer: bool = False  # sent with ``steer``: the running turn takes it at its next step
    type: Literal["input.queued"] = "input.queued"


@dataclass(frozen=True, slots=True, kw_only=True)
class InputChanged(_Frame):
    """A message waiting in the queue was edited (``message`` is its new version) or
    withdrawn (``withdrawn``: it will not run) before it ran."""

    queued_id: str
    message: Message | None = None
    withdrawn: bool = False
    type: Literal["input.changed"] = "input.changed"


@dataclass(frozen=True, slots=True, kw_only=True)
class BranchChanged(_Frame):
    """The conversation's current branch changed: an edit or a regenerate forked it (the
    turn that follows writes its rows there), or it was switched to another leaf. Its
    rows are those in ``ranges`` (seq ranges, through ``tip``, the row it was moved to)
    and every row after ``since``; ``seq`` is ``since``, the newest row when it moved.
    Rows a client shows that are not on it belong to another branch: read ``/messages``
    to show the branch again."""

    tip: int
    ranges: list[list[int]]
    since: int
    type: Literal["branch.changed"] = "branch.changed"


@dataclass(frozen=True, slots=True, kw_only=True)
class InputWaiting(_Frame):
    """A message waits for a turn slot: the server runs as many turns as it may at once
    (``server.max_turns``). Nothing of it is stored yet. It begins when a slot comes free,
    in the order messages came (its ``turn.started`` follows), or after ``wait_s``
    seconds it is refused: an ``error`` frame with the code ``overloaded``, and the
    stream ends. ``position`` is its place in the line when it joined (1: next)."""

    position: int
    wait_s: float
    client_message_id: str | None = None
    type: Literal["input.waiting"] = "input.waiting"


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextCompacted(_Frame):
    """The request outgrew the model's window. ``method`` says what was done:
    ``summary`` (the rows up to ``through_seq`` were summarised into a stored summary
    row) or ``dropped`` (``dropped`` older messages were left out of the request). The
    store keeps every row either way."""

    method: str
    reason: str  # "estimate" (pre-flight) or "provider" (the provider refused it)
    dropped: int
    through_seq: int | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    type: Literal["context.compacted"] = "context.compacted"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRetrying(_Frame):
    attempt: int
    delay_s: float
    error: str
    type: Literal["model.retrying"] = "model.retrying"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnFinished(_Frame):
    """A turn ended: ``stop_reason`` says how (docs/loop.md): ``end_turn``, ``paused``,
    ``budget_exhausted`` (its model calls ran out), ``spend_limit`` (a spend budget
    stopped it before a model call: its last row says which and when it resets),
    ``cancelled``, ``failed``, ``crashed``, or ``interrupted`` (closed by recovery);
    ``state`` is the conversation's after it."""

    turn_id: str
    stop_reason: TurnStopReason
    state: str
    metrics: JSON = field(default_factory=dict)
    error: str | None = None
    type: Literal["turn.finished"] = "turn.finished"


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorFrame(_Frame):
    code: str
    message: str
    type: Literal["error"] = "error"


Frame: TypeAlias = (
    TurnStarted
    | MessageCommitted
    | TextDeltaFrame
    | ThinkingDeltaFrame
    | TextDiscarded
    | ToolStarted
    | ToolFinished
    | ToolProgress
    | AgentToken
    | InputRequested
    | ApprovalRequested
    | ApprovalDecided
    | InputQueued
    | InputChanged
    | BranchChanged
    | InputWaiting
    | ContextCompacted
    | ModelRetrying
    | TurnFinished
    | ErrorFrame
)

FRAME_TYPES: tuple[str, ...] = (
    "turn.started",
    "message",
    "text.delta",
    "thinking.delta",
    "text.discarded",
    "tool.started",
    "tool.finished",
    "tool.progress",
    "agent.token",
    "input.requested",
    "approval.requested",
    "approval.decided",
    "input.queued",
    "input.changed",
    "branch.changed",
    "input.waiting",
    "context.compacted",
    "model.retrying",
    "turn.finished",
    "error",
)
