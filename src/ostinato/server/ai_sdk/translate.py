"""One turn's frames as the AI SDK's UI message stream chunks. Pure: frames in, chunks out.

The chunks are the ``ai`` package's (v7, ``uiMessageChunkSchema``), each a JSON object:

- ``start`` (``messageId``, ``messageMetadata``: ``{"conversationId": ...}``), first;
- a model call is a step: ``start-step`` ... ``finish-step``;
- ``text.delta`` -> ``text-start`` / ``text-delta`` / ``text-end`` (filtered, one filter
  chain per reply; ``text-end`` when the reply's row is committed); ``thinking.delta`` ->
  ``reasoning-start`` / ``reasoning-delta`` / ``reasoning-end``;
- each tool call of a committed assistant row -> ``tool-input-start`` and
  ``tool-input-available`` (``dynamic``: the client does not declare ostinato's tools);
  ``tool.finished`` -> ``tool-output-available``, or ``tool-output-error``;
- ``approval.requested`` -> ``tool-approval-request`` (``approvalId`` is the approval's
  id), and the stream ends there (the turn waits; the client answers with
  ``addToolApprovalResponse`` and its next request carries the answer); a declined call
  -> ``tool-output-denied``;
- ``input.requested`` (a question card) -> ``data-ostinato-card`` with the card; the
  tool part stays waiting for ``addToolOutput``;
- ``tool.progress`` -> a transient ``data-ostinato-progress``;
- hidden rows stay hidden (the turn's memory recall and other lookups: a hidden
  assistant row's calls, and ``read`` calls no shown row carries), with their results and
  progress, unless the client asked for them (``include_hidden``);
- ``turn.finished`` -> ``finish`` (``stop``; ``error`` after an ``error`` chunk when the
  turn failed; ``other`` when it was cancelled).
"""

from __future__ import annotations

from collections.abc import Callable

from ostinato.filters import OutputFilters
from ostinato.frames import (
    ApprovalDecided,
    ApprovalRequested,
    ErrorFrame,
    Frame,
    InputRequested,
    MessageCommitted,
    TextDeltaFrame,
    TextDiscarded,
    ThinkingDeltaFrame,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    TurnFinished,
    TurnStarted,
)
from ostinato.messages import JSON, ToolUseBlock

FINISH = {"end_turn": "stop", "paused": "stop", "budget_exhausted": "length", "failed": "error"}


class UIStream:
    """What the stream has opened (a step, a text or reasoning part) and the chunks each
    next frame adds. ``done`` once it has sent ``finish``."""

    def __init__(
        self,
        filters: Callable[[str | None], OutputFilters],
        message_id: str,
        metadata: JSON,
        include_hidden: bool = False,
    ) -> None:
        self.for_agent = filters  # the ai_sdk filters of the agent a turn.started names
        self.filters = filters(None)
        self.chain = self.filters.chain()
        self.message_id, self.metadata = message_id, metadata
        self.parts = 0
        self.text: str | None = None  # the id of the open text part
        self.reasoning: str | None = None
        self.step = False
        self.streamed = False  # text.delta seen since the last assistant row
        self.done = False
        self.include_hidden = include_hidden
        self.shown_calls: set[str] = set()  # tool calls of rows the client was shown
        self.hidden_calls: set[str] = set()  # and of hidden ones: their ends are too

    def start(self) -> list[JSON]:
        return [{"type": "start", "messageId": self.message_id, "messageMetadata": self.metadata}]

    def see(self, frame: Frame) -> list[JSON]:
        match frame:
            case TurnStarted(skill=skill):
                self.filters = self.for_agent(skill)
                self.chain = self.filters.chain()
            case TextDeltaFrame(text=text):
                self.streamed = True
                return self._text(self.chain.feed(text))
            case ThinkingDeltaFrame(text=text):
                return self._reasoning(text)
            case TextDiscarded():  # the call is tried again: its parts end as they are
                self.chain, self.streamed = self.filters.chain(), False
                return self._close_parts()
            case _ if self._hidden(frame):
                return []
            case MessageCommitted(message=row) if row.role == "assistant":
                self.shown_calls.update(call.id for call in row.tool_uses)
                return self._row("" if self.streamed else row.text, row.tool_uses)
            case ToolFinished():
                return [self._output(frame)]
            case ToolProgress() | ApprovalRequested() | ApprovalDecided() | InputRequested():
                return self._waits(frame)
            case TurnFinished(stop_reason=reason, error=error):
                failed = [{"type": "error", "errorText": error or "the turn failed"}]
                return [*(failed if reason == "failed" else []), *self._finish(_reason(reason))]
            case (
                ErrorFrame(run_id="", message=message)
                | ErrorFrame(code="overflow" | "closing" | "unauthorized", message=message)
            ):
                return [{"type": "error", "errorText": message}, *self._finish("error")]
        return []

    def _hidden(self, frame: Frame) -> bool:
        """Whether the frame tells of a hidden row or of a call in one (a lookup)."""
        if self.include_hidden:
            return False
        match frame:
            case MessageCommitted(message=row) if row.role == "assistant" and row.hidden:
                self.hidden_calls.update(call.id for call in row.tool_uses)
                return True
            case ToolStarted(category="read", tool_use_id=call_id):
                if call_id not in self.shown_calls:  # a lookup whose row was not shown
                    self.hidden_calls.add(call_id)
                return True
            case ToolFinished() | ToolProgress():
                return frame.tool_use_id in self.hidden_calls
        return False

    def _waits(
        self, frame: ToolProgress | ApprovalRequested | ApprovalDecided | InputRequested
    ) -> list[JSON]:
        """Progress, and what waits for a person."""
        match frame:
            case ToolProgress(heartbeat=False):
                data = {"toolCallId": frame.tool_use_id, "name": frame.name, "text": frame.text}
                return [{"type": "data-ostinato-progress", "data": data, "transient": True}]
            case ApprovalRequested():
                request = {
                    "type": "tool-approval-request",
                    "approvalId": frame.approval_id,
                    "toolCallId": frame.tool_use_id,
                }
                return [request, *self._finish("tool-calls")]
            case ApprovalDecided(ending=ending) if ending != "APPROVED":
                return [{"type": "tool-output-denied", "toolCallId": frame.tool_use_id}]
            case InputRequested():
                card = {"toolCallId": frame.tool_use_id, "name": frame.name, "input": frame.input}
                return [{"type": "data-ostinato-card", "id": frame.tool_use_id, "data": card}]
        return []

    def _open_step(self) -> list[JSON]:
        if self.step:
            return []
        self.step = True
        return [{"type": "start-step"}]

    def _new_id(self, kind: str) -> str:
        self.parts += 1
        return f"{kind}-{self.parts}"

    def _text(self, text: str) -> list[JSON]:
        if not text:
            return []
        out = self._open_step()
        if self.text is None:
            self.text = self._new_id("text")
            out.append({"type": "text-start", "id": self.text})
        out.append({"type": "text-delta", "id": self.text, "delta": text})
        return out

    def _reasoning(self, text: str) -> list[JSON]:
        out = self._open_step()
        if self.reasoning is None:
            self.reasoning = self._new_id("reasoning")
            out.append({"type": "reasoning-start", "id": self.reasoning})
        out.append({"type": "reasoning-delta", "id": self.reasoning, "delta": text})
        return out

    def _close_parts(self) -> list[JSON]:
        out: list[JSON] = []
        if self.reasoning is not None:
            out.append({"type": "reasoning-end", "id": self.reasoning})
            self.reasoning = None
        if self.text is not None:
            out.append({"type": "text-end", "id": self.text})
            self.text = None
        return out

    def _row(self, unstreamed: str, calls: list[ToolUseBlock]) -> list[JSON]:
        """An assistant row: its text ends, its tool calls appear, its step ends."""
        out = self._text(self.chain.feed(unstreamed) + self.chain.flush())
        self.chain, self.streamed = self.filters.chain(), False
        out += self._open_step() + self._close_parts()
        for call in calls:
            common = {"toolCallId": call.id, "toolName": call.name, "dynamic": True}
            out.append({"type": "tool-input-start", **common})
            out.append({"type": "tool-input-available", **common, "input": call.input})
        self.step = False
        return [*out, {"type": "finish-step"}]

    def _output(self, frame: ToolFinished) -> JSON:
        if frame.status == "ok":
            return {"type": "tool-output-available", "toolCallId": frame.tool_use_id,
                    "output": frame.result, "dynamic": True}  # fmt: skip
        return {"type": "tool-output-error", "toolCallId": frame.tool_use_id,
                "errorText": frame.result or frame.status, "dynamic": True}  # fmt: skip

    def _finish(self, reason: str) -> list[JSON]:
        out = self._text(self.chain.flush()) + self._close_parts()
        if self.step:
            out.append({"type": "finish-step"})
            self.step = False
        self.done = True
        return [*out, {"type": "finish", "finishReason": reason}]


def _reason(stop_reason: str) -> str:
    return FINISH.get(stop_reason, "other")
