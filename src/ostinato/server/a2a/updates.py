"""A task's frames as A2A stream events (``StreamResponse`` objects). Pure.

A stream first sends the ``Task`` (from the store); then, for the frames of the task's
turns (the turn its message began and those that continue it):

- ``text.delta`` -> an ``artifactUpdate`` of ``answer``: the first one a stream sends
  replaces the artifact (``append: false``, the replies so far and the delta), the next
  ones append the delta as a part; a committed reply replaces the artifact with every
  reply's whole text, so a client that joined mid-reply ends with exactly what is
  stored; ``text.discarded`` (the call is tried again) puts it back the same way;
- a committed tool row with ``write_file`` results -> an ``artifactUpdate`` of
  ``file:<path>`` (an ``append`` write appends its part);
- ``tool.started`` / ``tool.finished`` -> a ``statusUpdate`` (``working``) whose message
  says what runs and carries the call (``toolCall``) or its result (``toolResult``) in
  a data part;
- ``approval.requested`` -> a ``statusUpdate`` ``input-required`` with the approval;
  ``approval.decided`` -> ``working`` again;
- the last turn's ``turn.finished``: ``paused`` -> ``input-required`` with the card
  (``paused``, read from the store by the route); otherwise the final state
  (``completed``, ``canceled``, ``failed`` with the error), and the stream ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ostinato.answers import Waiting, WaitingApproval
from ostinato.exchanges import CONTINUING, TERMINAL, Status, ended
from ostinato.frames import (
    ApprovalDecided,
    ApprovalRequested,
    Frame,
    MessageCommitted,
    TextDeltaFrame,
    TextDiscarded,
    ToolFinished,
    ToolStarted,
    TurnFinished,
    TurnStarted,
)
from ostinato.messages import JSON, Message, ToolUseBlock
from ostinato.server.a2a.tasks import (
    ANSWER,
    FILE_TOOL,
    TaskView,
    agent_message,
    answer_artifact,
    file_artifact,
    file_part,
    iso,
    replies,
    waiting_message,
)
from ostinato.server.a2a.wire import STATES
from ostinato.store.base import utcnow

RESULT_SHOWN = 2000  # characters of a tool's result in its status message


@dataclass
class Updates:
    """What one stream has sent of a task, and the events each next frame adds.
    ``done``: the task reached a final state (the stream ends); ``paused``: the last
    turn ended waiting for a card (the route reads it and calls ``waiting``)."""

    view: TaskView
    turn_ids: set[str]
    run_ids: set[str]
    replies: list[str] = field(default_factory=list)
    files: set[str] = field(default_factory=set)
    calls: dict[str, ToolUseBlock] = field(default_factory=dict)
    answer_sent: bool = False
    state: Status = "working"
    done: bool = False
    paused: bool = False
    last_seq: int = 0

    @classmethod
    def of(cls, view: TaskView, turn_ids: set[str], run_ids: set[str]) -> Updates:
        found = cls(view, set(turn_ids), set(run_ids), replies=replies(view.rows))
        found.answer_sent = bool(found.replies)
        found.state = view.status
        found.last_seq = view.read_through
        for row in view.rows:
            found.calls.update((u.id, u) for u in row.tool_uses)
            found.files.update(f"file:{u.input.get('path')}" for u in row.tool_uses)
        return found

    def first(self) -> JSON:
        from ostinato.server.a2a.tasks import task_json

        return {"task": task_json(self.view)}

    def see(self, frame: Frame) -> list[JSON]:
        """The events ``frame`` adds (none for another task's frames)."""
        if isinstance(frame, TurnStarted):
            return self._started(frame)
        if isinstance(frame, MessageCommitted):
            if frame.message.turn_id not in self.turn_ids or frame.seq <= self.last_seq:
                return []
            self.last_seq = frame.seq
            return self._row(frame.message)
        if frame.run_id not in self.run_ids:
            return []
        match frame:
            case TextDeltaFrame(text=text):
                return [self._answer([text], append=self.answer_sent)]
            case TextDiscarded() if self.answer_sent:
                return [self._answer([], append=False)]
            case ToolStarted() | ToolFinished():
                return self._tool(frame)
            case ApprovalRequested() as asked:
                waiting = WaitingApproval(asked.approval_id, asked.tool_use_id, asked.tool,
                                          asked.input, asked.risk, asked.family)  # fmt: skip
                return [self.waiting(waiting)]
            case ApprovalDecided():
                return [self._status("working")]
            case TurnFinished(stop_reason=reason, error=error):
                return self._finished(reason, error)
        return []

    def _tool(self, frame: ToolStarted | ToolFinished) -> list[JSON]:
        if isinstance(frame, ToolStarted):
            data = {"toolCall": {"id": frame.tool_use_id, "name": frame.name,
                                 "input": frame.input}}  # fmt: skip
            text, key = f"Calling {frame.name}.", f"call-{frame.tool_use_id}"
            return [self._status("working", text, data, key)]
        shown = frame.result[:RESULT_SHOWN]
        data = {"toolResult": {"id": frame.tool_use_id, "name": frame.name,
                               "status": frame.status, "result": shown}}  # fmt: skip
        text, key = f"{frame.name} finished: {frame.status}.", f"done-{frame.tool_use_id}"
        return [self._status("working", text, data, key)]

    def _finished(self, reason: str, error: str | None) -> list[JSON]:
        if reason == "paused":
            self.paused = True
            return []
        self.done = True
        state = ended(reason)
        return [self._status(state, error if state == "failed" else None)]

    def waiting(self, waiting: Waiting | None) -> JSON:
        """``input-required`` with what waits (``None``: it was answered meanwhile)."""
        self.paused = False
        if waiting is None:
            return self._status("working")
        self.state = "input_required"
        message = waiting_message(waiting, self.view.id, self.view.context_id)
        return self._update({"state": STATES["input_required"], "message": message})

    def _started(self, frame: TurnStarted) -> list[JSON]:
        if frame.turn_id in self.turn_ids:
            self.run_ids.add(frame.run_id)
            return [] if self.state == "working" else [self._status("working")]
        if frame.kind in CONTINUING and self.state == "input_required":
            self.turn_ids.add(frame.turn_id)
            self.run_ids.add(frame.run_id)
            return [self._status("working")]
        if self.state == "input_required":  # a new message dismissed what waited
            self.done = True
            return [self._status("cancelled")]
        return []

    def _row(self, row: Message) -> list[JSON]:
        out: list[JSON] = []
        for use in row.tool_uses:
            self.calls[use.id] = use
        if row.role == "assistant" and not row.hidden and row.text.strip():
            self.replies.append(row.text)
            out.append(self._answer([], append=False))
        for result in row.tool_results:
            call = self.calls.get(result.tool_use_id)
            if call is None or call.name != FILE_TOOL or result.is_error:
                continue
            path, content = call.input.get("path"), call.input.get("content")
            if isinstance(path, str) and isinstance(content, str):
                out.append(self._file(path, content, str(call.input.get("mode") or "")))
        return out

    def _answer(self, delta: list[str], *, append: bool) -> JSON:
        self.answer_sent = True
        if append:
            artifact = {"artifactId": ANSWER, "parts": [{"text": t} for t in delta]}
        else:
            artifact = answer_artifact([*self.replies, *delta])
        return self._artifact(artifact, append)

    def _file(self, path: str, content: str, mode: str) -> JSON:
        artifact_id = f"file:{path}"
        append = mode == "append" and artifact_id in self.files
        self.files.add(artifact_id)
        return self._artifact(file_artifact(path, [file_part(path, content)]), append)

    def _artifact(self, artifact: JSON, append: bool) -> JSON:
        update = {"taskId": self.view.id, "contextId": self.view.context_id,
                  "artifact": artifact, "append": append}  # fmt: skip
        return {"artifactUpdate": update}

    def _status(
        self, state: Status, text: str | None = None, data: JSON | None = None, key: str = ""
    ) -> JSON:
        self.state = state
        self.done = self.done or state in TERMINAL
        status: JSON = {"state": STATES[state]}
        if text is not None:
            message_id = f"{self.view.id}-{key or state}"
            message = agent_message(text, self.view.id, self.view.context_id, message_id)
            if data is not None:
                message["parts"].append({"data": data, "mediaType": "application/json"})
            status["message"] = message
        return self._update(status)

    def _update(self, status: JSON) -> JSON:
        status["timestamp"] = iso(utcnow())
        update = {"taskId": self.view.id, "contextId": self.view.context_id, "status": status}
        return {"statusUpdate": update}
