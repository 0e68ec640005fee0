"""One run's frames as AG-UI events (protocol 1.0, the ``ag-ui-protocol`` types). Pure.

- ``RUN_STARTED`` first, then a ``STATE_SNAPSHOT`` of what ostinato shows as state: the
  conversation (``conversationId``), the tools running now (``running``: call id to
  tool name) and what waits (``waiting``); ``STATE_DELTA`` patches as tools start and
  end;
- ``text.delta`` -> ``TEXT_MESSAGE_START`` / ``TEXT_MESSAGE_CONTENT``, and
  ``TEXT_MESSAGE_END`` when the reply's row is committed (or the call is tried again);
- each tool call of a committed row -> ``TOOL_CALL_START`` / ``TOOL_CALL_ARGS`` /
  ``TOOL_CALL_END``; ``tool.finished`` -> ``TOOL_CALL_RESULT``; ``tool.progress`` -> a
  ``CUSTOM`` event ``ostinato.tool.progress``;
- an approval or a question card -> a ``CUSTOM`` event ``on_interrupt`` with what waits,
  then ``RUN_FINISHED`` with the ``interrupt`` outcome (one interrupt: its ``id`` is the
  approval's id, or the card's tool call id; a ``responseSchema`` says what answers
  it), and the stream ends; the next run's ``resume`` entries answer it;
- ``turn.finished``: ``RUN_FINISHED`` (success; ``cancelled`` outcome when it was
  cancelled), or ``RUN_ERROR`` when the turn failed.
"""

from __future__ import annotations

import json

from ostinato.answers import Waiting, WaitingApproval, WaitingCard, describe, options_of
from ostinato.frames import (
    ApprovalRequested,
    ErrorFrame,
    Frame,
    InputRequested,
    MessageCommitted,
    TextDeltaFrame,
    TextDiscarded,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    TurnFinished,
)
from ostinato.messages import JSON, ToolUseBlock

SUCCESS = frozenset({"end_turn", "budget_exhausted"})
RESULT_SHOWN = 20_000  # characters of a tool's result in TOOL_CALL_RESULT


class RunEvents:
    """What one run's stream has opened, and the events each next frame adds. ``done``
    once it has sent ``RUN_FINISHED`` or ``RUN_ERROR``."""

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id, self.run_id = thread_id, run_id
        self.text: str | None = None  # the open text message's id
        self.messages = 0
        self.card: WaitingCard | None = None
        self.done = False

    def start(self, state: JSON) -> list[JSON]:
        started = {"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id,
                   "protocolVersion": "1.0"}  # fmt: skip
        return [started, {"type": "STATE_SNAPSHOT", "snapshot": state}]

    def see(self, frame: Frame) -> list[JSON]:
        match frame:
            case TextDeltaFrame(text=text) if text:
                return self._text(text)
            case TextDiscarded():
                return self._close()
            case MessageCommitted(message=row) if row.role == "assistant" and not row.hidden:
                parent = self.text or row.id or ""  # the calls belong to the reply's message
                return [*self._close(), *self._calls(parent, row.tool_uses)]
            case ToolStarted(tool_use_id=use_id, name=name):
                return [self._delta("add", use_id, name)]
            case ToolFinished() as finished:
                return self._result(finished)
            case ToolProgress(tool_use_id=use_id, name=name, text=text):
                value = {"toolCallId": use_id, "name": name, "text": text}
                return [{"type": "CUSTOM", "name": "ostinato.tool.progress", "value": value}]
            case ApprovalRequested() as asked:
                waiting = WaitingApproval(asked.approval_id, asked.tool_use_id, asked.tool,
                                          asked.input, asked.risk, asked.family)  # fmt: skip
                return self.interrupt(waiting)
            case InputRequested(tool_use_id=use_id, name=name, input=given):
                self.card = WaitingCard(use_id, name, given)
            case TurnFinished(stop_reason=reason, error=error):
                return self._finished(reason, error)
            case ErrorFrame(code=code, message=message):
                return self._error(message, code)
        return []

    def interrupt(self, waiting: Waiting) -> list[JSON]:
        """The run ends waiting for ``waiting`` (the next run's ``resume`` answers it)."""
        found = interrupt_of(waiting)
        custom = {"type": "CUSTOM", "name": "on_interrupt", "value": found}
        outcome = {"type": "interrupt", "interrupts": [found]}
        return [*self._close(), custom, self._end(outcome=outcome)]

    def _text(self, text: str) -> list[JSON]:
        out: list[JSON] = []
        if self.text is None:
            self.messages += 1
            self.text = f"{self.run_id}-text-{self.messages}"
            out.append({"type": "TEXT_MESSAGE_START", "messageId": self.text, "role": "assistant"})
        out.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": self.text, "delta": text})
        return out

    def _close(self) -> list[JSON]:
        if self.text is None:
            return []
        closed, self.text = self.text, None
        return [{"type": "TEXT_MESSAGE_END", "messageId": closed}]

    def _calls(self, parent: str, uses: list[ToolUseBlock]) -> list[JSON]:
        out: list[JSON] = []
        for use in uses:
            use_id, name, given = use.id, use.name, use.input
            start = {"type": "TOOL_CALL_START", "toolCallId": use_id, "toolCallName": name}
            if parent:
                start["parentMessageId"] = parent
            args = json.dumps(given, ensure_ascii=False)
            out += [start, {"type": "TOOL_CALL_ARGS", "toolCallId": use_id, "delta": args},
                    {"type": "TOOL_CALL_END", "toolCallId": use_id}]  # fmt: skip
        return out

    def _result(self, finished: ToolFinished) -> list[JSON]:
        content, use_id = finished.result[:RESULT_SHOWN], finished.tool_use_id
        result = {"type": "TOOL_CALL_RESULT", "messageId": f"result-{use_id}",
                  "toolCallId": use_id, "content": content, "role": "tool"}  # fmt: skip
        return [self._delta("remove", finished.tool_use_id, None), result]

    def _delta(self, op: str, use_id: str, name: str | None) -> JSON:
        patch: JSON = {"op": op, "path": f"/running/{_pointer(use_id)}"}
        if name is not None:
            patch["value"] = name
        return {"type": "STATE_DELTA", "delta": [patch]}

    def _finished(self, reason: str, error: str | None) -> list[JSON]:
        if reason == "paused" and self.card is not None:
            return self.interrupt(self.card)
        if reason in SUCCESS or reason == "paused":
            return [*self._close(), self._end()]
        if reason == "cancelled":
            return [*self._close(), self._end(outcome={"type": "cancelled"})]
        return self._error(error or f"the turn ended {reason}", reason)

    def _end(self, outcome: JSON | None = None) -> JSON:
        self.done = True
        end: JSON = {"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id}
        if outcome is not None:
            end["outcome"] = outcome
        return end

    def _error(self, message: str, code: str) -> list[JSON]:
        self.done = True
        return [*self._close(), {"type": "RUN_ERROR", "message": message, "code": code}]


def _pointer(key: str) -> str:
    """``key`` as one JSON Pointer segment."""
    return key.replace("~", "~0").replace("/", "~1")


def interrupt_of(waiting: Waiting) -> JSON:
    """What waits as an AG-UI ``Interrupt``."""
    if isinstance(waiting, WaitingApproval):
        schema: JSON = {
            "type": "object",
            "properties": {
                "approved": {"type": "boolean"},
                "remember": {"type": "string", "enum": ["none", "exact", "family"]},
            },
            "required": ["approved"],
        }
        return {"id": waiting.approval_id, "reason": "tool_approval",
                "message": describe(waiting), "toolCallId": waiting.tool_use_id,
                "responseSchema": schema,
                "metadata": {"tool": waiting.tool, "input": waiting.input,
                             "risk": waiting.risk}}  # fmt: skip
    return {"id": waiting.tool_use_id, "reason": "question", "message": describe(waiting),
            "toolCallId": waiting.tool_use_id, "responseSchema": card_schema(waiting),
            "metadata": {"tool": waiting.name, "input": waiting.input}}  # fmt: skip


def card_schema(card: WaitingCard) -> JSON:
    """What answers a card: ``{"answer": ...}`` (an option's text for ``ask_user`` with
    options, any text without), or ``{"id": ...}`` for ``choose``."""
    options = options_of(card)
    if card.name == "choose":
        ids = [value for _, value in options]
        return {"type": "object", "properties": {"id": {"type": "string", "enum": ids}},
                "required": ["id"]}  # fmt: skip
    answer: JSON = {"type": "string"}
    if options:
        answer["enum"] = [label for label, _ in options]
    return {"type": "object", "properties": {"answer": answer}, "required": ["answer"]}
