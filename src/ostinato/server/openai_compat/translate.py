"""One turn's frames as what a completion says. Pure: frames in, pieces out.

``Reply.see(frame)`` gives the pieces a frame adds, in order:

- ``text.delta``: the filtered text (after ``text.discarded``, a retried call's words
  that were already said are not said again) (``ostinato.filters``, one chain per assistant reply);
  an assistant row whose text did not stream is said whole when it is committed; the
  text of a later reply is set apart from the one before by a blank line;
- tool steps (when ``progress`` is on): a line of ``reasoning_content`` when a tool
  starts, says what it does, and ends (lookups, category ``read``, are not described);
- ``approval.requested``: the completion ends at once with a sentence saying what waits
  and how to answer it (the turn goes on waiting; the next message answers it);
- ``input.requested``: the same sentence for the question card; the turn then ends
  ``paused``;
- ``turn.finished``: the end, with the usage; a turn that ``failed`` ends in an error;
- an ``error`` frame of the stream itself (the server closing, a credential revoked, a
  turn that could not begin): an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

from ostinato.answers import Waiting, WaitingApproval, WaitingCard, describe
from ostinato.filters import OutputFilters
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
    TurnStarted,
)
from ostinato.messages import JSON
from ostinato.server.openai_compat.wire import usage_of


@dataclass(frozen=True, slots=True)
class Content:
    text: str


@dataclass(frozen=True, slots=True)
class Reasoning:
    text: str


@dataclass(frozen=True, slots=True)
class Finish:
    reason: str  # OpenAI's finish_reason
    usage: JSON
    waiting: Waiting | None = None


@dataclass(frozen=True, slots=True)
class Failed:
    code: str
    message: str


Piece: TypeAlias = Content | Reasoning | Finish | Failed
SEPARATOR = "\n\n"


class Reply:
    """What one completion has said so far, and the pieces each next frame adds."""

    def __init__(
        self,
        filters: OutputFilters,
        *,
        progress: bool = False,
        for_agent: Callable[[str | None], OutputFilters] | None = None,
    ) -> None:
        self.filters = filters
        self.for_agent = for_agent  # the filters of the agent a turn.started names
        self.progress = progress
        self.chain = filters.chain()
        self.streamed = False  # text.delta seen since the last assistant row
        self.said = False  # any content said in this completion
        self.fresh = True  # no content said yet in the current assistant reply
        self.quiet: set[str] = set()  # read tools: not described
        self.card: WaitingCard | None = None  # the question card the turn paused on
        self.shown: list[str] = []  # the content said of the current reply, in pieces
        self.resent = ""  # what a retried call will say again: not said twice

    def see(self, frame: Frame) -> list[Piece]:
        if type(frame) is TextDeltaFrame:  # most frames: first, without the match below
            self.streamed = True
            return self._say(self._once(self.chain.feed(frame.text)))
        match frame:
            case TurnStarted(skill=skill) if self.for_agent is not None and skill:
                self.filters = self.for_agent(skill)
                self.chain = self.filters.chain()
            case TextDiscarded():
                # A model call is tried again (or failed): what it showed cannot be taken
                # back, so the same words, streamed again, are not said twice.
                self.resent, self.shown = "".join(self.shown), []
                self.chain, self.streamed = self.filters.chain(), False
                return []
            case MessageCommitted(message=row) if row.role == "assistant":
                text = "" if self.streamed else self.chain.feed(row.text)
                out = self._say(self._once(text + self.chain.flush()))
                self.chain, self.streamed, self.fresh = self.filters.chain(), False, True
                self.shown, self.resent = [], ""
                return out
            case ToolStarted() | ToolFinished() | ToolProgress():
                return self._step(frame)
            case ApprovalRequested():
                waiting = WaitingApproval(
                    frame.approval_id,
                    frame.tool_use_id,
                    frame.tool,
                    frame.input,
                    frame.risk,
                    frame.family,
                )
                return [*self._wait(waiting), Finish("stop", usage_of({}), waiting)]
            case InputRequested():
                self.card = WaitingCard(frame.tool_use_id, frame.name, frame.input)
                return self._wait(self.card)
            case TurnFinished(stop_reason="failed", error=error):
                return [Failed("turn_failed", error or "the turn failed")]
            case TurnFinished(metrics=metrics, stop_reason=reason):
                card = self.card if reason == "paused" else None
                return [Finish("stop", usage_of(metrics), card)]
            case (
                ErrorFrame(run_id="", code=code, message=message)
                | ErrorFrame(
                    code=("overflow" | "closing" | "unauthorized") as code, message=message
                )
            ):
                return [Failed(code, message)]
        return []

    def _once(self, text: str) -> str:
        """``text`` without the part a discarded call already showed."""
        self.shown.append(text)
        if not self.resent:
            return text
        same = 0
        while same < min(len(text), len(self.resent)) and text[same] == self.resent[same]:
            same += 1
        if same < min(len(text), len(self.resent)):  # it says something else now
            self.resent = ""
            return text[same:]
        self.resent = self.resent[same:]
        return text[same:]

    def _say(self, text: str) -> list[Piece]:
        if not text:
            return []
        if self.fresh and self.said:
            text = SEPARATOR + text.lstrip("\n")
        self.fresh, self.said = False, True
        return [Content(text)]

    def _wait(self, waiting: Waiting) -> list[Piece]:
        tail = self.chain.flush()
        self.chain = self.filters.chain()
        out = self._say(tail)
        self.fresh = True
        return [*out, *self._say(describe(waiting))]

    def _step(self, frame: ToolStarted | ToolFinished | ToolProgress) -> list[Piece]:
        if isinstance(frame, ToolStarted) and frame.category == "read":
            self.quiet.add(frame.tool_use_id)
        if not self.progress or frame.tool_use_id in self.quiet:
            return []
        if isinstance(frame, ToolStarted):
            return [Reasoning(f"Running {frame.name}.\n")]
        if isinstance(frame, ToolProgress):
            return [] if frame.heartbeat else [Reasoning(f"{frame.name}: {frame.text}\n")]
        seconds = f"{frame.duration_s:.1f} s"
        return [Reasoning(f"{frame.name} finished: {frame.status} ({seconds}).\n")]
