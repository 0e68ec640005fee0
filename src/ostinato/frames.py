"""Frames: the typed events every surface receives. Their names are public API.

Every frame has ``type``, ``run_id`` (the turn that emitted it) and ``seq``. ``seq`` is the
conversation's durable position: a ``message`` frame carries the seq of the row it
announces (and only it has an SSE ``id``); every other frame carries the seq of the last
row committed before it. So ``seq`` never decreases on a stream, and a client that sees
a ``message`` frame whose seq skips ahead knows it missed a row and can read
``/messages?after_seq=``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import ClassVar, Literal, TypeAlias

from ostinato.messages import JSON, Message, message_to_json


@dataclass(frozen=True, slots=True, kw_only=True)
class _Frame:
    run_id: str
    seq: int

    durable: ClassVar[bool] = False

    def to_json(self) -> JSON:
        out: JSON = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = message_to_json(value) if isinstance(value, Message) else value
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStarted(_Frame):
    turn_id: str
    kind: str = "user"
    type: Literal["turn.started"] = "turn.started"


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageCommitted(_Frame):
    """A row was committed; ``message`` is the row as ``/messages`` returns it."""

    message: Message
    client_message_id: str | None = None
    type: Literal["message"] = "message"
    durable: ClassVar[bool] = True


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDeltaFrame(_Frame):
    text: str
    type: Literal["text.delta"] = "text.delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingDeltaFrame(_Frame):
    text: str
    type: Literal["thinking.delta"] = "thinking.delta"


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
class ModelRetrying(_Frame):
    attempt: int
    delay_s: float
    error: str
    type: Literal["model.retrying"] = "model.retrying"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnFinished(_Frame):
    turn_id: str
    stop_reason: str
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
    | ToolStarted
    | ToolFinished
    | ModelRetrying
    | TurnFinished
    | ErrorFrame
)

FRAME_TYPES: tuple[str, ...] = (
    "turn.started",
    "message",
    "text.delta",
    "thinking.delta",
    "tool.started",
    "tool.finished",
    "model.retrying",
    "turn.finished",
    "error",
)
