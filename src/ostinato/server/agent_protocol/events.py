"""A run's stream: its turn's frames as the Agent Protocol's events, by stream mode.

- ``metadata`` first (``{"run_id", "attempt"}``);
- ``values``: after each row, the thread's messages (``wire.messages_of``); once the run
  waits for a person, with ``__interrupt__``;
- ``messages-tuple``: each text delta as ``[AIMessageChunk, metadata]`` (event
  ``messages``); ``messages``: the message so far (``messages/partial``), then whole
  (``messages/complete``);
- ``updates``: each row as the step that wrote it (``{"agent": {"messages": [...]}}``,
  ``{"tools": ...}``), and ``{"__interrupt__": [...]}``;
- ``custom``: what a running tool says (``tool.progress``);
- ``error`` when the turn failed, and ``end`` once the run has ended or waits.

Events that follow a row carry its seq as their SSE id: a stream joined again with
``Last-Event-ID`` replays the run's rows after it, then goes on live. Pure: frames and
rows in, bytes out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from typing import Any

from ostinato.answers import Waiting, WaitingApproval, WaitingCard
from ostinato.frames import (
    ApprovalRequested,
    ErrorFrame,
    Frame,
    InputRequested,
    MessageCommitted,
    TextDeltaFrame,
    ToolProgress,
    TurnFinished,
)
from ostinato.messages import Message
from ostinato.server.agent_protocol.wire import interrupt_of, messages_of

MODES = frozenset({"values", "messages", "messages-tuple", "updates", "custom"})
REFUSED_MODES = {
    "events": "LangChain callback events",
    "debug": "LangGraph's debug events",
    "tasks": "LangGraph's task events",
    "checkpoints": "LangGraph's checkpoints",
}


def sse(event: str, data: Any, event_id: int | None = None) -> bytes:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    tail = f"\nid: {event_id}" if event_id is not None else ""
    return f"event: {event}\ndata: {text}{tail}\n\n".encode()


@dataclass(slots=True)
class RunStream:
    """One run's events (see the module's docstring): ``rows`` are the thread's rows so
    far (kept as they come), ``modes`` what the client asked for."""

    run_id: str
    modes: frozenset[str]
    rows: list[Message] = field(default_factory=list)
    ended: bool = False
    text: str = ""
    chunk_id: str = ""
    _chunk: tuple[str, str] = ("", "")  # a chunk event's bytes around its text
    _encoded: list[str] = field(default_factory=list)  # each shown row's messages, as JSON

    def __post_init__(self) -> None:
        shown = messages_of(self.rows)
        self._encoded = [json.dumps(m, ensure_ascii=False, separators=(",", ":")) for m in shown]

    def start(self) -> bytes:
        return sse("metadata", {"run_id": self.run_id, "attempt": 1})

    def see(self, frame: Frame) -> bytes:
        if type(frame) is TextDeltaFrame:
            return self._delta(frame)
        match frame:
            case MessageCommitted(message=row):
                return self.row(row)
            case ToolProgress(heartbeat=False) if "custom" in self.modes:
                data = {"tool": frame.name, "tool_call_id": frame.tool_use_id, "text": frame.text}
                return sse("custom", data)
            case ApprovalRequested():
                waiting = WaitingApproval(
                    frame.approval_id,
                    frame.tool_use_id,
                    frame.tool,
                    frame.input,
                    frame.risk,
                    frame.family,
                )
                return self.interrupted(waiting, frame.seq)
            case InputRequested():
                card = WaitingCard(frame.tool_use_id, frame.name, frame.input)
                return self.interrupted(card, frame.seq)
            case TurnFinished(stop_reason=reason, error=error):
                return self._finished(reason, error)
            case (
                ErrorFrame(run_id="", message=message)
                | ErrorFrame(code=("overflow" | "closing" | "unauthorized"), message=message)
            ):
                self.ended = True
                return sse("error", {"error": frame.code, "message": message})
        return b""

    def _delta(self, frame: TextDeltaFrame) -> bytes:
        chunk_id = f"msg-{frame.seq + 1}"
        if chunk_id != self.chunk_id:
            self.chunk_id, self.text = chunk_id, ""
            meta = json.dumps({"langgraph_node": "agent", "run_id": self.run_id})
            self._chunk = (
                'event: messages\ndata: [{"type":"AIMessageChunk","content":',
                f',"id":"{chunk_id}","tool_calls":[],"tool_call_chunks":[]}},{meta}]\n\n',
            )
        self.text += frame.text
        out = b""
        if "messages-tuple" in self.modes:  # the chunk's shared part is made once
            head, tail = self._chunk
            out += f"{head}{encode_basestring(frame.text)}{tail}".encode()
        if "messages" in self.modes:
            partial = {"type": "ai", "content": self.text, "id": chunk_id, "tool_calls": []}
            out += sse("messages/partial", [partial])
        return out

    def row(self, row: Message) -> bytes:
        """A committed row: the events that follow it, with its seq as their id."""
        self.rows.append(row)
        if row.hidden:
            return b""
        new = messages_of([row])
        out = b""
        if "messages" in self.modes and row.role == "assistant":
            out += sse("messages/complete", new[:1], row.seq)
        if "messages-tuple" in self.modes and row.role == "tool":
            out += b"".join(sse("messages", [m, {"langgraph_node": "tools"}]) for m in new)
        if "updates" in self.modes and row.role != "user":
            node = "agent" if row.role == "assistant" else "tools"
            out += sse("updates", {node: {"messages": new}}, row.seq)
        if "values" in self.modes:  # each row's messages are encoded once
            self._encoded += [json.dumps(m, ensure_ascii=False, separators=(",", ":")) for m in new]
            values = '{"messages":[' + ",".join(self._encoded) + "]}"
            out += f"event: values\ndata: {values}\nid: {row.seq}\n\n".encode()
        return out

    def interrupted(self, waiting: Waiting, seq: int) -> bytes:
        self.ended = True
        found = [interrupt_of(waiting)]
        out = b""
        if "updates" in self.modes:
            out += sse("updates", {"__interrupt__": found}, seq)
        if "values" in self.modes:
            out += sse("values", {"messages": messages_of(self.rows), "__interrupt__": found})
        return out + sse("end", None)

    def _finished(self, reason: str, error: str | None) -> bytes:
        if self.ended:
            return b""
        self.ended = True
        if reason in ("failed", "crashed", "interrupted"):
            message = error or f"the turn {reason}"
            return sse("error", {"error": "RunError", "message": message}) + sse("end", None)
        return sse("end", None)
