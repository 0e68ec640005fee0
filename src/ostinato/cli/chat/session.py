"""The chat itself: lines in, turns out, and the person asked when a turn needs them.

A turn's frames are read by a thread and handled here, so the person can be asked in the
middle of a turn: an approval is asked ``y / n / always`` (``ostinato.answers`` reads the
answer; ``v`` shows the whole call, and a call that carries code is shown whole first,
``cli.chat.calls``), a question card is asked as a numbered choice once its turn has
paused. Ctrl-C while a turn runs cancels it (``POST /cancel``); a second Ctrl-C, before a
line is sent, leaves. After ``/open`` (or ``--conversation``), what the conversation waits
on is asked again: a pending approval, or the card a paused conversation waits on.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console

from ostinato.answers import AnswerCard, Decide, WaitingApproval, WaitingCard, describe, interpret
from ostinato.cli.chat.calls import in_full, one_line, shown_first
from ostinato.cli.chat.view import View, turn_endings
from ostinato.client import APIError, Client, Conflict, UnknownFrame
from ostinato.frames import ApprovalRequested, Frame, InputRequested, TurnFinished
from ostinato.messages import ToolUseBlock

HISTORY_SHOWN = 10
HELP = """commands:
  /attach PATH   attach a file to your next message
  /new           start a new conversation
  /open ID       open (resume) another conversation
  /model [NAME]  list the agents and models, or set this conversation's model
  /edit TEXT     send TEXT in place of your last message (a new branch)
  /retry         a new answer in place of the last one (a new branch)
  /branches [N]  list the branches, or make branch N the current one
  /help          this list
  /quit          leave (or end of input; Ctrl-C twice)
At an approval: y, n, a (always), v (see the whole call).
Ctrl-C while a turn runs cancels it."""
CHOICES = "[y]es / [n]o / [a]lways"
VIEW = frozenset({"v", "view"})  # at an approval's prompt: show the whole call
Frames = Iterator[Frame | UnknownFrame]
_END = object()


class Leave(Exception):
    """The person asked to leave (Ctrl-C twice, /quit, end of input)."""


class Session:
    def __init__(self, client: Client, console: Console, stdin: TextIO) -> None:
        self.client = client
        self.console = console
        self.view = View(console)
        self.stdin = stdin
        self.interactive = stdin.isatty()
        self.cid = ""
        self.attached: list[Path] = []
        self.interrupted = False  # Ctrl-C once at a prompt: the next one leaves
        self.cancelling = False  # Ctrl-C once in a turn: cancelled; the next one leaves

    # --- reading the person -------------------------------------------------------------

    def ask(self, prompt: str, *, in_turn: bool = False) -> str | None:
        """A line from the person (``None`` at the end of input). Ctrl-C: within a turn
        it cancels the turn (and the answer is empty), else it warns, then leaves."""
        self.view.pause()
        try:
            if self.interactive:
                return self.console.input(prompt, markup=False)
            line = self.stdin.readline()
            return line if line else None
        except EOFError:
            return None
        except KeyboardInterrupt:
            self._cancel() if in_turn else self._interrupt()
            return None if in_turn else ""

    def _interrupt(self) -> None:
        if self.interrupted:
            raise Leave
        self.interrupted = True
        self.view.line("  (Ctrl-C again to leave)", "dim")

    # --- conversations ----------------------------------------------------------------

    def open(self, conversation_id: str | None) -> None:
        if conversation_id is None:
            self.cid = self.client.create_conversation().id
            self.view.line(f"conversation {self.cid}")
            return
        rows = self.client.messages(conversation_id)
        self.cid = conversation_id
        self.view.line(f"conversation {conversation_id} (resumed, {len(rows)} rows)")
        self.view.history(rows[-HISTORY_SHOWN:], turn_endings(self.client.turns(conversation_id)))
        self.resume(rows)

    def resume(self, rows: list[Any]) -> None:
        """Ask again what the conversation waits on: a pending approval, or its card."""
        pending = self.client.approvals(self.cid, pending=True)
        if pending:
            a = pending[-1]
            waiting = WaitingApproval(
                a["id"], a["tool_use_id"], a["tool"], a["arguments"], a["risk"], a.get("family")
            )
            after = max((r.seq or 0 for r in rows), default=0)
            self.follow(self.client.events(self.cid, after_seq=after), asking=waiting)
            return
        if self.client.conversation(self.cid).state == "paused":
            card = _awaited_card(rows)
            if card is not None:
                self.answer(card)

    # --- turns ----------------------------------------------------------------------------

    def send(self, text: str) -> None:
        files, self.attached = self.attached, []
        self.follow(self.client.stream(self.cid, text, files=files))

    def follow(self, frames: Frames, *, asking: WaitingApproval | None = None) -> None:
        """Show a turn's frames until it finishes, asking the person what it needs.
        ``asking``: an approval to ask first, once the frames are being read (the turn
        its answer continues is then seen from its first frame); unanswered, the frames
        are not followed."""
        inbox: queue.Queue[Any] = queue.Queue()
        stop = threading.Event()
        threading.Thread(target=_pump, args=(frames, inbox, stop), daemon=True).start()
        if asking is not None and not self.approve(asking):
            stop.set()
            return
        card: WaitingCard | None = None
        self.cancelling = False
        try:
            while True:
                try:
                    item = inbox.get(timeout=0.1)
                    if item is _END or isinstance(item, TurnFinished | Exception):
                        break
                    card = self._handle(item, card)
                except queue.Empty:
                    continue
                except KeyboardInterrupt:
                    self._cancel()
        finally:
            stop.set()
        if isinstance(item, Exception):
            raise item
        if isinstance(item, TurnFinished):
            self.view.frame(item)
        if card is not None:
            self.answer(card)

    def _handle(self, frame: Frame | UnknownFrame, card: WaitingCard | None) -> WaitingCard | None:
        self.view.frame(frame)
        if isinstance(frame, ApprovalRequested):
            waiting = WaitingApproval(
                frame.approval_id, frame.tool_use_id, frame.tool, frame.input, frame.risk,
                frame.family,
            )  # fmt: skip
            self.approve(waiting)
        elif isinstance(frame, InputRequested):
            return WaitingCard(frame.tool_use_id, frame.name, frame.input)
        return card

    def _cancel(self) -> None:
        if self.cancelling:
            raise Leave
        self.cancelling = True
        self.view.pause()
        self.view.line("  [cancelling; Ctrl-C again to leave]", "yellow")
        with contextlib.suppress(Conflict):  # it ended meanwhile
            self.client.cancel(self.cid)

    # --- people in the loop ---------------------------------------------------------------

    def approve(self, waiting: WaitingApproval) -> bool:
        """Ask about an approval until it is answered; whether it was (not at the end of
        input: it then waits, and times out). A call that carries code is shown whole
        first; ``v`` shows any call whole."""
        self.view.pause()
        if shown_first(waiting.input):
            self._show_call(waiting)
            prompt = f"allow {waiting.tool} as shown above ({waiting.risk})? {CHOICES}: "
        else:
            arguments, cut = one_line(waiting.input)
            more = " / [v]iew all" if cut else ""
            prompt = f"allow {waiting.tool} {arguments} ({waiting.risk})? {CHOICES}{more}: "
        while True:
            line = self.ask(prompt, in_turn=True)
            if line is None:
                return False
            if line.strip().lower() in VIEW:
                self._show_call(waiting)
                continue
            reading = interpret(line, waiting)
            if isinstance(reading, Decide):
                self.client.decide(
                    self.cid, reading.approval_id, approve=reading.approve,
                    remember=reading.remember,
                )  # fmt: skip
                self.view.line("  approved" if reading.approve else "  declined", "dim")
                return True
            self.view.line("  answer y, n, a (or v to see the whole call)", "dim")

    def _show_call(self, waiting: WaitingApproval) -> None:
        first, *rest = in_full(waiting.tool, waiting.input, waiting.risk)
        self.view.line(first, "bold")
        for line in rest:
            self.view.line(line)

    def answer(self, card: WaitingCard) -> None:
        """Ask a question card: a number or an option's text answers it, other text is a
        message that dismisses it, an empty line leaves it waiting."""
        question, _, choices = describe(card).partition("\n")
        self.view.line(question, "bold")
        if choices:
            self.view.line(choices)
        line = self.ask("answer> ")
        if not line or not line.strip():
            self.view.line("  (the question waits; answer it later, or type a message)", "dim")
            return
        reading = interpret(line.strip(), card)
        if isinstance(reading, AnswerCard):
            self.follow(self.client.stream_answer(self.cid, reading.tool_use_id, reading.result))
        else:
            self.send(line.strip())

    # --- the loop ---------------------------------------------------------------------------

    def run(self, commands: Callable[[Session, str], bool]) -> None:
        """Read lines until the person leaves; ``commands`` handles a ``/`` line (``False``:
        not a command)."""
        while True:
            line = self.ask("you> ")
            if line is None:
                return
            text = line.strip()
            if not text:
                continue
            self.interrupted = False
            if text.startswith("/") and commands(self, text):
                continue
            try:
                self.send(text)
            except APIError as error:
                self.view.line(f"the server answered {error.status}: {error.message}", "red")


def _pump(frames: Frames, inbox: queue.Queue[Any], stop: threading.Event) -> None:
    try:
        for frame in frames:
            inbox.put(frame)
            if stop.is_set() or isinstance(frame, TurnFinished):
                break
    except Exception as exc:  # handed to the main thread, which raises it
        inbox.put(exc)
    finally:
        inbox.put(_END)
        close = getattr(frames, "close", None)
        if close is not None:
            close()


def _awaited_card(rows: list[Any]) -> WaitingCard | None:
    for row in reversed(rows):
        awaiting = row.metadata.get("awaiting") if row.role == "assistant" else None
        if awaiting:
            for block in row.blocks:
                if isinstance(block, ToolUseBlock) and block.id == awaiting:
                    return WaitingCard(block.id, block.name, block.input)
            return None
    return None
