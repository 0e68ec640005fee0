"""What a response shows, as steps of its ``EventLog``: read from the store (``replay``)
or from a turn's frames as they come (``Follow``). Pure: both are given what they read.

A response follows one turn from a point on (``after_seq``): a new message's turn, or
the turn an answered approval lets go on. Its steps, in the order both ways give them:

1. the calls the request's approval answers let run (an ``mcp_call`` each, with its
   ``approval_request_id``);
2. for each of the turn's rows after that point: an assistant row's text (a message),
   then its tool calls in their order, each an ``mcp_call``, except one that asks for a
   person's approval, which is an ``mcp_approval_request`` and ends the response (the
   turn waits; the next request answers it), and a question card, which ends the turn;
   a tool row's results end their calls (``completed`` or ``failed``); a call begun
   before this response appears when its result does. Hidden rows (a turn's seeds, a
   lookup) show nothing;
3. once the turn ends: a question card it paused on, in words (``answers.describe``:
   the next request's text answers it), then the end (``completed``, ``failed``,
   ``cancelled``).

Live, a call is shown once it is known to run without asking (its first progress, its
end, or its result), in its order among its row's calls, so that a call that asks
first is never shown as running: the same steps a replay reads back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ostinato.answers import WaitingCard, describe
from ostinato.approvals import Approval
from ostinato.frames import (
    ApprovalRequested,
    ErrorFrame,
    Frame,
    InputRequested,
    MessageCommitted,
    TextDeltaFrame,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    TurnFinished,
    TurnStarted,
)
from ostinato.messages import JSON, Message, ToolUseBlock
from ostinato.server.responses.events import AnyEvent, Event, EventLog, Status
from ostinato.store.base import Turn

ENDINGS: dict[str, Status] = {
    "end_turn": "completed",
    "paused": "completed",
    "budget_exhausted": "completed",
    "cancelled": "cancelled",
    "failed": "failed",
    "crashed": "failed",
    "interrupted": "failed",
}
Call = tuple[str, JSON]  # a tool call's name and input


def usage(metrics: JSON) -> JSON:
    tokens_in = int(metrics.get("tokens_in") or 0)
    tokens_out = int(metrics.get("tokens_out") or 0)
    return {
        "input_tokens": tokens_in,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": tokens_out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": int(metrics.get("tokens_total") or tokens_in + tokens_out),
    }


def ending(stop_reason: str, metrics: JSON, error: str | None) -> tuple[Status, JSON]:
    """A finished turn's status and what the response then carries."""
    status = ENDINGS.get(stop_reason, "failed")
    extra: JSON = {"usage": usage(metrics)}
    if status == "failed":
        extra["error"] = {"code": "server_error", "message": error or f"the turn {stop_reason}"}
    return status, extra


def asking(log: EventLog, approval_id: str, tool: str, arguments: JSON) -> list[AnyEvent]:
    """A call asks for approval: the request item, and the response is complete."""
    return log.approval_request(approval_id, tool, arguments) + log.finish(
        "completed", {"usage": usage({})}
    )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the store holds of a response's turn: its rows after the response began
    (in order), its approvals, the approvals the request answered, its tool calls (name
    and input), and the turn (``None``: not begun, its message waits)."""

    rows: Sequence[Message]
    approvals: Sequence[Approval]
    answers: Sequence[Approval]
    calls: dict[str, Call]
    turn: Turn | None


def replay(log: EventLog, snap: Snapshot) -> list[AnyEvent]:
    """The response's events so far, from what the store holds."""
    if snap.turn is None:
        return log.begin(queued=True)[:1]
    out = log.begin(queued=False)
    for answer in snap.answers:
        out += log.tool_call(answer.tool_use_id, answer.tool, answer.arguments, answer.id)
    reading = _Reading(log, snap)
    for row in snap.rows:
        out += reading.row(row)
        if log.ended:
            return out
    turn = snap.turn
    if turn.status != "finished" or turn.stop_reason is None:
        return out
    if reading.card is not None and turn.stop_reason == "paused":
        out += log.say(describe(reading.card))
    return out + log.finish(*ending(turn.stop_reason, turn.metrics, turn.error))


class _Reading:
    """One response's rows, read in order into its log."""

    def __init__(self, log: EventLog, snap: Snapshot) -> None:
        answered = {a.id for a in snap.answers}
        self.log, self.calls = log, snap.calls
        self.asked = {a.tool_use_id: a for a in snap.approvals if a.id not in answered}
        self.hidden: set[str] = set()
        self.card: WaitingCard | None = None

    def row(self, row: Message) -> list[AnyEvent]:
        log = self.log
        if row.role == "assistant" and row.hidden:
            self.hidden.update(use.id for use in row.tool_uses)
            return []
        if row.role == "tool":
            return self._results(row)
        if row.role != "assistant":
            return []
        out = log.close_text(row.text) if row.text else []
        awaiting = row.metadata.get("awaiting")
        for use in row.tool_uses:
            if use.id == awaiting:
                self.card = WaitingCard(use.id, use.name, use.input)
            elif use.id in self.asked:
                a = self.asked[use.id]
                return out + asking(log, a.id, a.tool, a.arguments)
            else:
                out += log.tool_call(use.id, use.name, use.input)
        return out

    def _results(self, row: Message) -> list[AnyEvent]:
        out: list[AnyEvent] = []
        for result in row.tool_results:
            call = self.calls.get(result.tool_use_id)
            if result.tool_use_id not in self.hidden and call is not None:
                out += self.log.tool_call(result.tool_use_id, *call)
            out += self.log.tool_result(result.tool_use_id, result.text, result.is_error)
        return out


@dataclass(slots=True)
class Follow:
    """A response's steps from its turn's frames, as they come (``see``); ``ended``
    once the response has ended. ``calls``: the name and input of the turn's calls
    begun before this response (their results may land in it)."""

    log: EventLog
    calls: dict[str, Call] = field(default_factory=dict)
    ended: bool = False
    pending: list[ToolUseBlock] = field(default_factory=list)  # a row's calls, not shown
    running: set[str] = field(default_factory=set)  # known to run without asking
    asked: dict[str, ApprovalRequested] = field(default_factory=dict)
    hidden: set[str] = field(default_factory=set)
    card: WaitingCard | None = None

    def start(self, queued: bool, answers: Sequence[Approval] = ()) -> list[AnyEvent]:
        out = self.log.begin(queued)
        for a in answers:
            out += self.log.tool_call(a.tool_use_id, a.tool, a.arguments, a.id)
        return out

    def see(self, frame: Frame) -> list[AnyEvent]:
        log = self.log
        if type(frame) is TextDeltaFrame:  # most frames
            return log.delta(frame.text)
        match frame:
            case TurnStarted():
                return log.started()
            case MessageCommitted(message=row):
                return self._row(row)
            case ToolStarted(tool_use_id=call_id, name=name, input=arguments):
                self.calls[call_id] = (name, arguments)
            case ToolProgress(tool_use_id=call_id) | ToolFinished(tool_use_id=call_id):
                self.running.add(call_id)
                return self._show()
            case ApprovalRequested(tool_use_id=call_id):
                if all(use.id != call_id for use in self.pending):  # a call begun earlier
                    self.ended = True
                    return asking(log, frame.approval_id, frame.tool, frame.input)
                self.asked[call_id] = frame
                return self._show()
            case InputRequested(tool_use_id=call_id, name=name, input=arguments):
                self.card = WaitingCard(call_id, name, arguments)
            case TurnFinished(stop_reason=reason, metrics=metrics, error=error):
                return self._finish(reason, metrics, error)
            case (
                ErrorFrame(run_id="", code=code, message=message)
                | ErrorFrame(
                    code=("overflow" | "closing" | "unauthorized") as code, message=message
                )
            ):
                self.ended = True
                number = log.slot * (1 << 20) - 1
                data = {
                    "type": "error",
                    "code": code,
                    "message": message,
                    "param": None,
                    "sequence_number": number,
                }
                return [Event(number, data)]
        return []

    def _row(self, row: Message) -> list[AnyEvent]:
        log = self.log
        if row.role == "assistant" and row.hidden:
            self.hidden.update(use.id for use in row.tool_uses)
            return []
        if row.role == "assistant":
            out = log.close_text(row.text or None) if row.text or log.text else []
            awaiting = row.metadata.get("awaiting")
            for use in row.tool_uses:
                if use.id == awaiting:
                    self.card = WaitingCard(use.id, use.name, use.input)
                else:
                    self.pending.append(use)
            return out + self._show()
        if row.role != "tool":
            return []
        self.running.update(use.id for use in self.pending)  # their results are in
        out = self._show()
        for result in row.tool_results:
            call = self.calls.get(result.tool_use_id)
            if result.tool_use_id not in self.hidden and call is not None:
                out += log.tool_call(result.tool_use_id, *call)
            out += log.tool_result(result.tool_use_id, result.text, result.is_error)
        return out

    def _show(self) -> list[AnyEvent]:
        """The row's calls known by now, in their order, up to one still unknown."""
        out: list[AnyEvent] = []
        while self.pending and not self.ended:
            use = self.pending[0]
            if use.id in self.asked:
                self.pending.clear()
                self.ended = True
                a = self.asked[use.id]
                out += asking(self.log, a.approval_id, a.tool, a.input)
            elif use.id in self.running:
                self.pending.pop(0)
                out += self.log.tool_call(use.id, use.name, use.input)
            else:
                break
        return out

    def _finish(self, reason: str, metrics: JSON, error: str | None) -> list[AnyEvent]:
        self.running.update(use.id for use in self.pending)
        out = self._show()
        if self.ended:
            return out
        if self.card is not None and reason == "paused":
            out += self.log.say(describe(self.card))
        self.ended = True
        return out + self.log.finish(*ending(reason, metrics, error))
