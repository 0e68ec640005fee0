"""How ``ostinato chat`` shows a turn's frames, with ``rich``.

In a terminal, the reply being written is Markdown rendered live, and each running tool is
a spinner line that shows what the tool last said (``tool.progress``); a finished tool
step becomes one line. Anywhere else (a pipe, a file) the text is written as it streams
and each tool step is a ``[tool]`` line: plain text that a program can read.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.spinner import Spinner
from rich.text import Text

from ostinato.client import UnknownFrame
from ostinato.frames import (
    ApprovalDecided,
    ErrorFrame,
    Frame,
    MessageCommitted,
    ModelRetrying,
    TextDeltaFrame,
    TextDiscarded,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    TurnFinished,
)
from ostinato.messages import JSON


def short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def ending(stop_reason: str | None, error: str | None) -> str | None:
    """The line for a turn that did not end with an answer (live, or after a reload)."""
    if stop_reason in (None, "end_turn"):
        return None
    return f"  [turn ended {stop_reason}{f': {error}' if error else ''}]"


class View:
    """One console; the turn's reply and running tools while a turn streams."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live_mode = console.is_terminal
        self.text = ""  # the reply being written
        self.running: dict[str, tuple[str, str]] = {}  # tool_use_id -> (name, last said)
        self.quiet: set[str] = set()  # ``read`` calls: lookups, not shown
        self.live: Live | None = None
        self.at_line_start = True

    # --- plain output ------------------------------------------------------------------

    def line(self, text: str, style: str | None = None) -> None:
        """A whole line, above the live part (never read as markup)."""
        if not self.live_mode and not self.at_line_start:
            self.console.file.write("\n")
        self.console.print(Text(text, style=style or ""), soft_wrap=True)
        self.at_line_start = True

    def _write(self, text: str) -> None:
        self.console.file.write(text)
        self.console.file.flush()
        if text:
            self.at_line_start = text.endswith("\n")

    # --- the live part -------------------------------------------------------------------

    def _render(self, spinners: bool = True) -> RenderableType:
        parts: list[RenderableType] = [Markdown(self.text)] if self.text else []
        for name, said in self.running.values() if spinners else ():
            label = Text.assemble((name, "bold"), " ", said)
            parts.append(Spinner("dots", text=label, style="cyan"))
        return Group(*parts)

    def _refresh(self) -> None:
        if not self.live_mode:
            return
        if self.live is None:
            self.live = Live(self._render(), console=self.console, refresh_per_second=10)
            self.live.start()
        else:
            self.live.update(self._render())

    def pause(self) -> None:
        """Stop the live part: before a prompt, or at the end of a reply. Its last render
        stays on screen without the spinners (a spinner that no longer turns would read
        as a call still running; they come back with the live part)."""
        if self.live is not None:
            self.live.update(self._render(spinners=False))
            self.live.stop()
            self.live = None
        if not self.live_mode and not self.at_line_start:
            self._write("\n")

    def _end_reply(self) -> None:
        running, self.running = self.running, {}
        self.pause()
        self.text, self.running = "", running

    # --- frames --------------------------------------------------------------------------

    def frame(self, frame: Frame | UnknownFrame) -> None:
        match frame:
            case TextDeltaFrame(text=text):
                self.text += text
                self._write(text) if not self.live_mode else self._refresh()
            case TextDiscarded():
                if self.text:
                    self._end_reply()
                    self.line("  [the text above was not kept]", "dim")
            case MessageCommitted(message=row) if row.role == "assistant":
                if not self.text and row.text:
                    self.text = row.text
                    self._write(row.text) if not self.live_mode else self._refresh()
                self._end_reply()
            case ToolStarted() | ToolProgress() | ToolFinished():
                self._tool(frame)
            case ApprovalDecided(tool_use_id=tool_use_id, ending="APPROVED"):
                self._approved(tool_use_id)
            case ModelRetrying(delay_s=delay, error=error):
                self.line(f"  [model busy, retrying in {delay} s: {error}]", "yellow")
            case ErrorFrame(code=code, message=message):
                self.line(f"  [error] {code}: {message}", "red")
            case TurnFinished(stop_reason=reason, error=error):
                self._end_reply()
                self.running = {}
                note = ending(reason, error)
                if note:
                    self.line(note, "yellow")

    def _tool(self, frame: ToolStarted | ToolProgress | ToolFinished) -> None:
        if isinstance(frame, ToolStarted) and frame.category == "read":
            self.quiet.add(frame.tool_use_id)
        if frame.tool_use_id in self.quiet:
            return
        if isinstance(frame, ToolStarted):
            arguments = short(json.dumps(frame.input, ensure_ascii=False))
            if self.live_mode:
                self.running[frame.tool_use_id] = (frame.name, arguments)
                self._refresh()
            else:
                self.line(f"  [tool] {frame.name} {arguments}")
        elif isinstance(frame, ToolProgress):
            if frame.tool_use_id in self.running and not frame.heartbeat:
                self.running[frame.tool_use_id] = (frame.name, short(frame.text, 80))
                self._refresh()
        else:
            self.running.pop(frame.tool_use_id, None)
            mark = "✓" if frame.status == "ok" else "✗"
            summary = f"{frame.status} ({frame.duration_s:.2f} s): {short(frame.result)}"
            text = (
                f"  {mark} {frame.name} {summary}"
                if self.live_mode
                else (f"  [tool] {frame.name} -> {summary}")
            )
            self.line(text, "green" if frame.status == "ok" else "red")
            self._refresh()

    def _approved(self, tool_use_id: str) -> None:
        """An approved call runs now: its spinner comes back (it stopped for the prompt)."""
        if tool_use_id in self.running:
            name, said = self.running[tool_use_id]
            self.running[tool_use_id] = (name, f"(approved, running) {said}")
            self._refresh()

    def history(self, rows: list[Any], endings: dict[str, str]) -> None:
        """The last rows of a resumed conversation, each turn's ending after its rows."""
        last_of_turn = {row.turn_id: i for i, row in enumerate(rows)}
        for i, row in enumerate(rows):
            if row.role in ("user", "assistant") and row.text:
                who = "you" if row.role == "user" else "assistant"
                self.line(f"  {who}: {short(row.text)}")
            note = endings.get(row.turn_id or "")
            if note and last_of_turn.get(row.turn_id) == i:
                self.line(note)


def turn_endings(turns: list[JSON]) -> dict[str, str]:
    """The ending line of each turn that did not end with an answer, by turn id."""
    found: dict[str, str] = {}
    for turn in turns:
        note = ending(turn.get("stop_reason"), turn.get("error"))
        if note and turn.get("stop_reason") != "paused":
            found[str(turn["id"])] = note
    return found
