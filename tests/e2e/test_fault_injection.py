"""Proof by fault injection (issue 4, item 8; DESIGN invariants 3, 6, 7, 8).

``ostinato serve`` runs as a real process on SQLite (and on PostgreSQL when
``OSTINATO_TEST_POSTGRES_URL`` is set, in a scratch database dropped afterwards). Each
**life** of the server brings several conversations to the points where a crash hurts
most, then SIGKILLs the server, starts it again on the same database and data dir, and
checks every conversation it touched. Several conversations share one kill, because a
start costs seconds and a kill costs nothing; each is at its own point when it lands:

stable points, set up first in every life (they hold until the kill):
  - ``approval``: a ``shell`` call waits for approval (the turn's SSE stream is open);
  - ``card``: a question card waits (its JSON request returned ``paused``);
  - ``queued``: a slow turn streams, one to three messages wait in its queue (each
    ``input.queued`` frame seen), one more was sent but not confirmed;
  - ``cancel``: a calculator turn was cancelled as a seeded frame (0..8) of its stream
    arrived (before the first model call, during a tool, between a result and the next
    call, while the answer streams);
  - ``shell``: an approved ``shell`` command runs (``echo a >> marks.txt; sleep 20``);

then one timed point, in rotation, the kill landing right after it:
  - ``stream``: N frames into a slow model stream (``/slow 40``, N seeded, 0..30);
  - ``tool-turn``: N frames into a (fast) calculator turn's stream (N seeded, 0..9);
  - ``post``: the JSON ``POST /turns`` has just returned its 2xx;
  - ``approve``: the approval ``POST`` has just returned (the command may or may not have
    run: ``echo a >> marks.txt``);
  - ``tool-started``: a seeded 0-0.4 s after a shell command was approved (its
    ``approval.decided`` frame; its ``tool.started`` came before the approval was asked);
  - ``card-frame``: the ``input.requested`` frame of a card has just arrived;
  - ``edit``: N frames into the stream of an edit of an answered question (N seeded,
    0..9: the kill may land before its move of the branch is committed, or in its turn);
  - ``regenerate``: the same for a regenerate of the answer.

Every fourth life also kills the server again a seeded 0-0.3 s after it came back (while
recovered queued messages run), and starts it a third time.

- ``approval-crash``: an approval pending at a kill is approved after the restart, and the
  server is killed again the moment the decision's 200 arrives. The decision is committed
  before the turn that runs the call has begun; the restart after that finds the decided
  approval whose call has no result and continues it (``Runtime.recover``). This test found
  that case: before the fix the conversation stayed ``paused`` for good and the approved
  command never ran.

After every kill, for every conversation: each message accepted (a 2xx, or a
``turn.started`` / ``input.queued`` frame on its stream) is one user row, and one that was
sent but not confirmed is at most one; every tool_use has exactly one tool_result in the
tool rows right after it (a waiting card or approval excepted, until it is answered); a
card shown before the kill can be answered after it; every branch of the tree, read from
the database, is valid: every row follows an older row, a turn wrote to one branch only,
and every tool_use in a branch has exactly one result in that branch (``tree_problems``);
an approval pending before the kill
is pending with the same id and approving it runs the command once (count the lines of
``marks.txt``), a second decision is a 409; a command that was running is reported
"outcome unknown" and never run again; a new message then runs to ``end_turn``, and the
database has no turn or tool call left ``running``. At the end, every conversation is
read once more: nothing was added, duplicated or run again by the later restarts.

The model is not the offline one but a fake Chat Completions server in this process
(``fake_model.py``; the server reaches it through ``OSTINATO_MODEL=openai-chat:...`` and
``OPENAI_BASE_URL``). It answers like the offline model (``/tool NAME {json}``), can
stream slowly (``/slow N``) so a kill lands inside a model stream, and checks every
request the server sends against OpenAI's history rules: a history a crash left invalid
fails the test even where the store's rows look right.

The server is ``ostinato serve`` with ``--database-url``, ``--data-dir`` and
``--approval-timeout``, started from a fork server (``forkserver.py``: ostinato imported
once, a fresh forked process per start) because a plain start spends seconds importing;
``OSTINATO_FAULT_FORKSERVER=0`` starts each one as ``python -m ostinato serve`` instead.

Randomness is seeded (``OSTINATO_FAULT_SEED``); ``OSTINATO_FAULT_LIVES`` sets the number
of lives (default 16: 20 kills checked). Timing is only ever waited on (generous
timeouts), never asserted. No two turns of a conversation may overlap (the database's
times). The races of cancels, of two servers on one database and of ``--workers`` with
a worker killed are the run's other half: ``test_fault_races.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest
import sqlalchemy as sa

from tests.e2e.fake_model import AnsweringChat
from tests.e2e.invariants import (
    Row,
    overlapping_turns,
    result_text,
    results_for,
    running_in_db,
    stored_once,
    tool_pairs,
    tree_problems,
    tree_rows,
    user_text,
)
from tests.e2e.server import ForkServer, Server, SSEReader

SEED = int(os.environ.get("OSTINATO_FAULT_SEED", "20261130"))
LIVES = int(os.environ.get("OSTINATO_FAULT_LIVES", "16"))
FORK = os.environ.get("OSTINATO_FAULT_FORKSERVER", "1") != "0"
POSTGRES_ENV = "OSTINATO_TEST_POSTGRES_URL"
WAIT = 60.0  # seconds: how long anything may take before the test gives up
UNKNOWN = "outcome unknown"


class Broken(AssertionError):
    """An invariant failed; the message says which, for which conversation and kill."""


@dataclass
class Convo:
    id: str
    name: str
    accepted: list[str] = field(default_factory=list)
    maybe: list[str] = field(default_factory=list)
    marks: tuple[int, int] = (0, 0)  # how many lines its shell commands may have written


@dataclass
class Lab:
    server: Server
    fake: AnsweringChat
    rng: random.Random
    convos: list[Convo] = field(default_factory=list)
    readers: list[SSEReader] = field(default_factory=list)
    life: int = 0
    cancels: int = 0  # cancel points run (``CancelledTurn``)

    # --- the API ---------------------------------------------------------------------

    def new_convo(self, name: str) -> Convo:
        created = self.server.post("/v1/conversations", {"title": name})
        assert created.status_code == 201, created.text
        convo = Convo(created.json()["id"], name)
        self.convos.append(convo)
        return convo

    def stream(self, convo: Convo, body: dict[str, Any]) -> SSEReader:
        reader = self.server.stream("POST", f"/v1/conversations/{convo.id}/turns", body)
        self.readers.append(reader)
        return reader

    def rows(self, convo: Convo) -> list[Row]:
        got = self.server.get(f"/v1/conversations/{convo.id}/messages?include_hidden=true")
        assert got.status_code == 200, got.text
        rows: list[Row] = got.json()["messages"]
        return rows

    def state(self, convo: Convo) -> str:
        got = self.server.get(f"/v1/conversations/{convo.id}")
        assert got.status_code == 200, got.text
        state: str = got.json()["state"]
        return state

    def pending(self, convo: Convo) -> list[Row]:
        got = self.server.get(f"/v1/conversations/{convo.id}/approvals?pending=true")
        assert got.status_code == 200, got.text
        approvals: list[Row] = got.json()["approvals"]
        return approvals

    def decide(self, convo: Convo, approval_id: str) -> int:
        path = f"/v1/conversations/{convo.id}/approvals/{approval_id}"
        return self.server.post(path, {"decision": "approve"}).status_code

    def settle(self, convo: Convo) -> str:
        """Wait until no turn runs in the conversation; its state then."""
        deadline = time.monotonic() + WAIT
        while (state := self.state(convo)) == "running":
            if time.monotonic() > deadline:
                self.fail(convo, f"still running after {WAIT} s")
            time.sleep(0.05)
        return state

    def marks(self, convo: Convo) -> int:
        """Lines the shell commands of this conversation wrote (one per run)."""
        path = self.server.data_dir / "workdirs" / convo.id / "marks.txt"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def fail(self, convo: Convo, problem: str) -> None:
        raise Broken(
            f"life {self.life}, conversation {convo.name} ({convo.id}): {problem}\n"
            f"--- server log ---\n{self.server.tail()}"
        )

    def expect(self, convo: Convo, problems: list[str]) -> None:
        if problems:
            self.fail(convo, "; ".join(problems))

    # --- lives -----------------------------------------------------------------------

    def kill(self) -> None:
        self.server.kill()
        for reader in self.readers:
            reader.finish()
        self.readers.clear()

    def quiet(self, convo: Convo) -> None:
        """Wait until the restarted server has run the messages it found queued: nothing
        queued, then nothing running (read in that order: a turn that took the last
        queued message was already running when the queue read empty)."""
        deadline = time.monotonic() + WAIT
        while True:
            queued = self.server.get(f"/v1/conversations/{convo.id}/queue").json()["queued"]
            if not queued and self.state(convo) != "running":
                return
            if time.monotonic() > deadline:
                self.fail(convo, f"still busy after {WAIT} s")
            time.sleep(0.05)

    def check_restart(self, convo: Convo) -> None:
        """Right after a restart (once the messages it found queued have run, so that no
        turn of the new server is half way): the history is valid but for what may
        still wait."""
        self.quiet(convo)
        rows = self.rows(convo)
        waiting = {a["tool_use_id"] for a in self.pending(convo)}
        if self.state(convo) == "paused":
            waiting |= {r["metadata"]["awaiting"] for r in rows if r["metadata"].get("awaiting")}
        self.expect(convo, tool_pairs(rows, waiting))
        self.check_tree(convo, rows, waiting)

    def check_tree(self, convo: Convo, rows: list[Row], waiting: Iterable[str] = ()) -> None:
        """Every branch of the conversation, read from the database (``tree_problems``)."""
        every = tree_rows(self.server.database_url, convo.id)
        leaf = rows[-1]["seq"] if rows else 0
        self.expect(convo, tree_problems(every, leaf, waiting))

    def check_marks(self, convo: Convo) -> None:
        low, high = convo.marks
        if not low <= (lines := self.marks(convo)) <= high:
            self.fail(convo, f"its shell commands wrote {lines} lines, not {low}..{high}")

    def check_final(self, convo: Convo) -> None:
        """After its own checks: a new message runs to its end, and all is closed."""
        self.settle(convo)
        text = f"ping {convo.name} after {len(convo.accepted)}"
        answer = self.server.post(f"/v1/conversations/{convo.id}/turns", {"text": text})
        if answer.status_code != 200:
            self.fail(convo, f"a new message got {answer.status_code}: {answer.text}")
        convo.accepted.append(text)
        if answer.json()["stop_reason"] != "end_turn":
            self.fail(convo, f"a new message's turn ended {answer.json()['stop_reason']}")
        rows = self.rows(convo)
        self.expect(convo, stored_once(rows, convo.accepted, convo.maybe))
        self.expect(convo, tool_pairs(rows))
        self.check_tree(convo, rows)
        self.expect(convo, running_in_db(self.server.database_url, convo.id))
        self.expect(convo, overlapping_turns(self.server.database_url, convo.id))
        self.check_marks(convo)
        if (state := self.state(convo)) != "idle":
            self.fail(convo, f"state {state!r} after a finished turn")
        if self.fake.violations:
            shapes = [
                [
                    (m["role"], m.get("tool_call_id") or m.get("tool_calls") or m.get("content"))
                    for m in body["messages"]
                ]
                for body in self.fake.bad_requests
            ]
            self.fail(convo, f"the model got invalid requests: {self.fake.violations} {shapes}")


# --- where the kill lands ------------------------------------------------------------------


class Scenario:
    """One conversation brought to one point; checked and resumed after the restart."""

    kind: ClassVar[str]

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.convo = lab.new_convo(f"{self.kind}-{lab.life}")

    def drive(self) -> None:
        raise NotImplementedError

    def after(self) -> None:
        """Its own checks after the restart, before the common ones."""

    def send_stream(self, text: str, **extra: Any) -> SSEReader:
        """A message with SSE; accepted once its turn has begun or it is queued."""
        reader = self.lab.stream(self.convo, {"text": text, **extra})
        frame = reader.until(lambda e: e.event in ("turn.started", "input.queued"), WAIT)
        assert frame.event is not None
        self.convo.accepted.append(text)
        return reader

    def fail(self, problem: str) -> None:
        self.lab.fail(self.convo, problem)


SHELL_ONCE = '/tool shell {"command": "echo a >> marks.txt"}'
SHELL_LONG = '/tool shell {"command": "echo a >> marks.txt; sleep 20"}'
CARD = '/tool ask_user {"question": "Which colour?", "options": ["red", "blue"]}'


class ApprovalPending(Scenario):
    kind = "approval"

    def drive(self) -> None:
        self.reader = self.send_stream(SHELL_ONCE)
        frame = self.reader.until_type("approval.requested", WAIT)
        self.approval_id = frame.data["approval_id"]
        self.tool_use_id = frame.data["tool_use_id"]

    def after(self) -> None:
        pending = [(a["id"], a["tool_use_id"]) for a in self.lab.pending(self.convo)]
        if pending != [(self.approval_id, self.tool_use_id)]:
            self.fail(f"pending approvals {pending}, not {self.approval_id}")
        if (state := self.lab.state(self.convo)) != "paused":
            self.fail(f"state {state!r} with an approval pending")
        if self.lab.marks(self.convo) != 0:
            self.fail("the command ran before it was approved")
        if (status := self.lab.decide(self.convo, self.approval_id)) != 200:
            self.fail(f"approving after the restart got {status}")
        self.lab.settle(self.convo)
        if (status := self.lab.decide(self.convo, self.approval_id)) != 409:
            self.fail(f"a second decision got {status}, not 409")
        if (lines := self.lab.marks(self.convo)) != 1:
            self.fail(f"the approved command ran {lines} times")
        self.convo.marks = (1, 1)
        results = results_for(self.lab.rows(self.convo), self.tool_use_id)
        if len(results) != 1 or results[0]["is_error"]:
            self.fail(f"the approved call's results: {results}")


class ApprovalThenCrash(ApprovalPending):
    """Pending at the kill; after the restart it is approved, and the server is killed
    again the moment the decision's answer arrives (the approved call's new turn has
    just begun, or not yet)."""

    kind = "approval-crash"

    def after(self) -> None:
        pending = [(a["id"], a["tool_use_id"]) for a in self.lab.pending(self.convo)]
        if pending != [(self.approval_id, self.tool_use_id)]:
            self.fail(f"pending approvals {pending}, not {self.approval_id}")
        if (status := self.lab.decide(self.convo, self.approval_id)) != 200:
            self.fail(f"approving after the restart got {status}")
        self.lab.kill()
        self.lab.server.start()
        self.lab.check_restart(self.convo)
        self.lab.settle(self.convo)
        if (status := self.lab.decide(self.convo, self.approval_id)) != 409:
            self.fail(f"deciding again after the second restart got {status}, not 409")
        lines = self.lab.marks(self.convo)
        results = results_for(self.lab.rows(self.convo), self.tool_use_id)
        if len(results) != 1:
            self.fail(f"the approved call has results {results}")
        ran = not results[0]["is_error"]
        if lines > 1 or (ran and lines != 1):
            self.fail(f"the approved command wrote {lines} lines; its result: {results}")
        self.convo.marks = (lines, lines)  # and never again


class CardPaused(Scenario):
    kind = "card"

    def drive(self) -> None:
        answer = self.lab.server.post(f"/v1/conversations/{self.convo.id}/turns", {"text": CARD})
        assert answer.status_code == 200, answer.text
        self.convo.accepted.append(CARD)
        assert answer.json()["stop_reason"] == "paused", answer.json()
        (card,) = [m for m in answer.json()["messages"] if m["metadata"].get("awaiting")]
        self.tool_use_id = card["metadata"]["awaiting"]

    def after(self) -> None:
        if (state := self.lab.state(self.convo)) != "paused":
            self.fail(f"state {state!r}: the card {self.tool_use_id} no longer waits")
        body = {"tool_response": {"tool_use_id": self.tool_use_id, "result": {"choice": "blue"}}}
        answer = self.lab.server.post(f"/v1/conversations/{self.convo.id}/turns", body)
        if answer.status_code != 200:
            self.fail(f"answering the card after the restart got {answer.status_code}")
        if answer.json()["stop_reason"] != "end_turn":
            self.fail(f"the resumed turn ended {answer.json()['stop_reason']}")
        results = results_for(self.lab.rows(self.convo), self.tool_use_id)
        if [result_text(r) for r in results] != [json.dumps({"choice": "blue"})]:
            self.fail(f"the card's results: {results}")


class Queued(Scenario):
    kind = "queued"

    def drive(self) -> None:
        self.send_stream(f"/slow 400 {self.convo.name}")
        for j in range(self.lab.rng.randint(1, 3)):
            text = f"{self.convo.name} queued {j}"
            self.send_stream(text, client_message_id=f"{self.convo.name}-{j}")
        unconfirmed = f"{self.convo.name} unconfirmed"
        self.lab.stream(self.convo, {"text": unconfirmed})
        self.convo.maybe.append(unconfirmed)


class CancelledTurn(Scenario):
    """A calculator turn (a hidden recall call first, then the model's call) cancelled
    as a seeded frame of its stream arrives, before this life's kill: its calls each
    have one result however the cancel met its writes (``test_fault_races`` has many
    more such points)."""

    kind = "cancel"

    def drive(self) -> None:
        reader = self.send_stream('/tool calculator {"expression": "6*7"}')
        with contextlib.suppress(EOFError):
            for _ in range(self.lab.rng.randint(0, 8)):
                if reader.next_frame(WAIT).event == "turn.finished":
                    break
        cancelled = self.lab.server.post(f"/v1/conversations/{self.convo.id}/cancel")
        assert cancelled.status_code in (200, 409), cancelled.text
        with contextlib.suppress(EOFError):
            reader.until_type("turn.finished", WAIT)
        self.lab.cancels += 1


class ShellRunning(Scenario):
    """An approved command runs; the kill lands ``delay`` after its ``approval.decided``
    frame (None: whenever the life's last scenario is done, during its ``sleep 20``)."""

    kind = "shell"
    delay: float | None = None

    def drive(self) -> None:
        self.reader = self.send_stream(SHELL_LONG)
        frame = self.reader.until_type("approval.requested", WAIT)
        self.tool_use_id = frame.data["tool_use_id"]
        assert self.lab.decide(self.convo, frame.data["approval_id"]) == 200
        # ``tool.started`` came before the approval was asked; the command starts now
        self.reader.until_type("approval.decided", WAIT)
        if self.delay is not None:
            time.sleep(self.delay)

    def after(self) -> None:
        results = results_for(self.lab.rows(self.convo), self.tool_use_id)
        if len(results) != 1 or not result_text(results[0]).startswith(UNKNOWN):
            self.fail(f"a command running at the crash has results {results}")
        if (lines := self.lab.marks(self.convo)) > 1:
            self.fail(f"a command running at the crash ran {lines} times")
        self.convo.marks = (lines, lines)  # and never again


class ToolStarted(ShellRunning):
    kind = "tool-started"

    def __init__(self, lab: Lab) -> None:
        super().__init__(lab)
        self.delay = lab.rng.uniform(0, 0.4)


class StreamFrames(Scenario):
    kind = "stream"

    def __init__(self, lab: Lab) -> None:
        super().__init__(lab)
        self.frames = lab.rng.randint(0, 30)

    def message(self) -> str:
        return f"/slow 40 {self.convo.name}"

    def drive(self) -> None:
        reader = self.send_stream(self.message())
        with contextlib.suppress(EOFError):
            for _ in range(self.frames):
                if reader.next_frame(WAIT).event == "turn.finished":
                    return


class ToolTurnFrames(StreamFrames):
    kind = "tool-turn"

    def __init__(self, lab: Lab) -> None:
        super().__init__(lab)
        self.frames = lab.rng.randint(0, 9)

    def message(self) -> str:
        return '/tool calculator {"expression": "6*7"}'


class AfterPost(Scenario):
    kind = "post"

    def drive(self) -> None:
        text = self.lab.rng.choice(["/tool clock {}", f"hello from {self.convo.name}"])
        answer = self.lab.server.post(f"/v1/conversations/{self.convo.id}/turns", {"text": text})
        assert answer.status_code == 200, answer.text
        self.convo.accepted.append(text)


class AfterApprove(Scenario):
    kind = "approve"

    def drive(self) -> None:
        reader = self.send_stream(SHELL_ONCE)
        frame = reader.until_type("approval.requested", WAIT)
        self.approval_id = frame.data["approval_id"]
        self.tool_use_id = frame.data["tool_use_id"]
        assert self.lab.decide(self.convo, self.approval_id) == 200

    def after(self) -> None:
        if self.lab.pending(self.convo):
            self.fail("an approval decided before the crash is pending again")
        if (status := self.lab.decide(self.convo, self.approval_id)) != 409:
            self.fail(f"deciding again after the restart got {status}, not 409")
        lines = self.lab.marks(self.convo)
        results = results_for(self.lab.rows(self.convo), self.tool_use_id)
        if len(results) != 1:
            self.fail(f"the approved call has results {results}")
        ran = not results[0]["is_error"]
        if lines > 1 or (ran and lines != 1):
            self.fail(f"the approved command wrote {lines} lines; its result: {results}")
        if not ran and not result_text(results[0]).startswith(UNKNOWN):
            self.fail(f"an approved call cut by the crash is not 'outcome unknown': {results}")
        self.convo.marks = (lines, lines)  # and never again


class CardFrame(CardPaused):
    kind = "card-frame"

    def drive(self) -> None:
        reader = self.send_stream(CARD)
        frame = reader.until_type("input.requested", WAIT)
        self.tool_use_id = frame.data["tool_use_id"]


class EditFrames(Scenario):
    """An answered question with a tool call; its edit (another tool call) streams, and
    the kill lands N frames into it (N seeded, 0..9: before its move is committed, or in
    its turn). After the restart the current branch holds the edit (once) or, if the
    edit was never confirmed, the question; both branches are valid."""

    kind = "edit"
    QUESTION = '/tool calculator {"expression": "6*7"}'
    EDIT = '/tool calculator {"expression": "5*8"}'

    def __init__(self, lab: Lab) -> None:
        super().__init__(lab)
        self.frames = lab.rng.randint(0, 9)
        self.began = False

    def ask(self) -> SSEReader:
        path = f"/v1/conversations/{self.convo.id}/messages/1/edit"
        return self.lab.server.stream("POST", path, {"text": self.EDIT})

    def drive(self) -> None:
        answer = self.lab.server.post(
            f"/v1/conversations/{self.convo.id}/turns", {"text": self.QUESTION}
        )
        assert answer.status_code == 200, answer.text
        self.convo.accepted.append(self.QUESTION)
        reader = self.ask()
        self.lab.readers.append(reader)
        with contextlib.suppress(EOFError):
            for _ in range(self.frames):
                frame = reader.next_frame(WAIT)
                self.began = self.began or frame.event == "turn.started"
                if frame.event == "turn.finished":
                    return

    def after(self) -> None:
        texts = [user_text(r) for r in self.lab.rows(self.convo) if r["role"] == "user"]
        if self.EDIT in texts:
            self.convo.accepted.remove(self.QUESTION)  # on the branch left behind
            self.convo.accepted.append(self.EDIT)
        elif self.began:
            self.fail(f"an edit whose turn began is not on the current branch: {texts}")
        every = tree_rows(self.lab.server.database_url, self.convo.id)
        if [r["seq"] for r in every][:4] != [1, 2, 3, 4]:
            self.fail("the rows of the first answer are not all kept")


class RegenerateFrames(EditFrames):
    """The same, for a regenerate of the answer (the question's turn is run again)."""

    kind = "regenerate"

    def ask(self) -> SSEReader:
        path = f"/v1/conversations/{self.convo.id}/messages/4/regenerate"
        return self.lab.server.stream("POST", path, {})

    def after(self) -> None:
        every = tree_rows(self.lab.server.database_url, self.convo.id)
        if [r["seq"] for r in every][:4] != [1, 2, 3, 4]:
            self.fail("the rows of the first answer are not all kept")


STABLE: tuple[type[Scenario], ...] = (
    ApprovalPending,
    CardPaused,
    Queued,
    CancelledTurn,
    ShellRunning,
)
TIMED: tuple[type[Scenario], ...] = (
    StreamFrames,
    ToolTurnFrames,
    AfterPost,
    AfterApprove,
    ToolStarted,
    CardFrame,
    ApprovalThenCrash,
    EditFrames,
    RegenerateFrames,
)


def run_lives(lab: Lab, lives: int) -> None:
    lab.server.start()
    for life in range(lives):
        lab.life = life
        scenarios = [kind(lab) for kind in STABLE]
        scenarios.append(TIMED[life % len(TIMED)](lab))
        for scenario in scenarios:
            scenario.drive()
        lab.kill()
        lab.server.start()
        if life % 4 == 3:  # again, while the restarted server picks up queued messages
            time.sleep(lab.rng.uniform(0, 0.3))
            lab.kill()
            lab.server.start()
        for scenario in scenarios:
            lab.check_restart(scenario.convo)
        for scenario in scenarios:
            scenario.after()
            lab.check_final(scenario.convo)
    for convo in lab.convos:  # nothing changed (or ran again) behind its back since
        rows = lab.rows(convo)
        lab.expect(convo, stored_once(rows, convo.accepted, convo.maybe))
        lab.expect(convo, tool_pairs(rows))
        lab.check_marks(convo)


# --- the engines ---------------------------------------------------------------------------


@contextlib.contextmanager
def scratch_postgres() -> Iterator[str]:
    from tests.store.conftest import _admin

    raw = os.environ.get(POSTGRES_ENV)
    if not raw:
        pytest.skip(f"PostgreSQL needs {POSTGRES_ENV}=postgresql://user@host:port/db")
    admin = sa.make_url(raw)
    name = f"ostinato_crash_{uuid.uuid4().hex[:12]}"
    _admin(admin, f'CREATE DATABASE "{name}"')
    try:
        url = admin.set(drivername="postgresql+asyncpg", database=name)
        yield url.render_as_string(hide_password=False)
    finally:
        _admin(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def database(engine: str, tmp_path: Path) -> Iterator[str]:
    if engine == "sqlite":
        yield f"sqlite:///{tmp_path / 'crash.db'}"
    else:
        with scratch_postgres() as url:
            yield url


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_sigkill_at_many_points_loses_and_repeats_nothing(engine: str, tmp_path: Path) -> None:
    with database(engine, tmp_path) as url, AnsweringChat() as fake:
        env = {
            "OSTINATO_MODEL": "openai-chat:fake-model",
            "OPENAI_BASE_URL": f"{fake.url}/v1",
            "OPENAI_API_KEY": "k",
        }
        forks = ForkServer() if FORK else None
        server = Server(url, tmp_path / "data", tmp_path / "serve.log", env, forks=forks)
        lab = Lab(server, fake, random.Random(f"{SEED}-{engine}"))
        began = time.monotonic()
        try:
            run_lives(lab, LIVES)
        finally:
            lab.kill()
            if forks is not None:
                forks.close()
        print(
            f"\n{engine}: {server.kills} kills, {lab.cancels} cancels, "
            f"{len(lab.convos)} conversations, "
            f"{time.monotonic() - began:.0f} s ({server.start_seconds:.0f} s starting)"
        )
        assert server.kills >= LIVES


def test_the_checks_see_what_they_look_for() -> None:
    """The invariant checks themselves, on rows made by hand."""

    def row(seq: int, role: str, *blocks: Row, **metadata: Any) -> Row:
        return {"seq": seq, "role": role, "blocks": list(blocks), "metadata": metadata}

    def use(i: str) -> Row:
        return {"type": "tool_use", "id": i, "name": "x", "input": {}}

    def result(i: str) -> Row:
        return {"type": "tool_result", "tool_use_id": i, "content": "r", "is_error": False}

    hi = row(1, "user", {"type": "text", "text": "hi"}, client_message_id="m1")
    calls = row(2, "assistant", use("a"), use("b"))
    assert tool_pairs([hi, calls, row(3, "tool", result("a")), row(4, "tool", result("b"))]) == []
    assert tool_pairs([hi, calls, row(3, "tool", result("a"))]) == ["seq 2: call b has no result"]
    assert tool_pairs([hi, calls, row(3, "tool", result("a"))], may_wait={"b"}) == []
    assert tool_pairs([hi, calls, row(3, "tool", result("a")), hi], may_wait={"b"}) == [
        "seq 2: waiting call b is not the last row"
    ]
    twice = [hi, calls, row(3, "tool", result("a"), result("b")), row(4, "tool", result("b"))]
    assert tool_pairs(twice) == ["seq 2: call b has 2 results"]
    assert tool_pairs([hi, row(2, "tool", result("z"))]) == [
        "seq 2: tool row with no call before it answers ['z']"
    ]
    stray = [hi, calls, row(3, "tool", result("a"), result("b"), result("c"))]
    assert tool_pairs(stray) == ["seq 2: result for c, not a call of that row"]
    reused = [hi, calls, row(3, "tool", result("a"), result("b")), hi, calls]
    assert "tool_use id a used 2 times" in tool_pairs(reused, may_wait={"a", "b"})
    assert stored_once([hi], ["hi"], ["bye"]) == []
    assert stored_once([hi, hi], ["hi"]) == [
        "accepted message 'hi' stored 2 times",
        "client_message_id 'm1' on 2 user rows",
    ]
    assert stored_once([], ["hi"]) == ["accepted message 'hi' stored 0 times"]
    assert stored_once([hi, hi], [], ["hi"])[0].endswith("stored 2 times")

    def node(seq: int, parent: int, role: str, *blocks: Row, turn: str = "t1") -> Row:
        return {**row(seq, role, *blocks), "parent_seq": parent, "turn_id": turn}

    q = {"type": "text", "text": "q"}
    tree = [
        node(1, 0, "user", q),
        node(2, 1, "assistant", use("a")),
        node(3, 2, "tool", result("a")),
        node(4, 1, "assistant", use("b"), turn="t2"),  # a regenerate: its call unanswered
    ]
    assert tree_problems(tree, 3) == ["branch ending at 4: seq 4: call b has no result"]
    assert tree_problems(tree, 4, may_wait={"b"}) == []  # it waits, on the current branch
    split = [*tree[:3], node(4, 1, "tool", result("a"))]  # a turn on two branches
    assert "turn t1 wrote rows [1, 2, 3, 4] on more than one branch" in tree_problems(split, 3)
    assert tree_problems([node(1, 0, "user", q), node(2, 5, "user", q)], 2) == [
        "seq 2: its parent 5 is not an older row"
    ]
