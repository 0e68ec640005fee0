"""Hand-over on SIGTERM under fault injection (issue 33): the server that takes a
handed-over turn is SIGKILLed in the middle of it.

Three ``ostinato serve`` processes on one scratch PostgreSQL database
(``test_handover.three_servers``). A turn runs on A: the model calls ``shell``
(``echo ran >> marks.txt; sleep 2``), A gets SIGTERM while the command runs, finishes
it and hands the turn over. The server that claims the turn (B or C: the turn's
``holder``, joined to the ``servers`` table for its pid) is SIGKILLed at one of three
seeded moments:

- ``claimed``: as soon as its claim is seen in ``turns.holder`` (before its model call,
  or while that call is in flight: the fake model holds its reply open);
- ``model-call``: while its model call is in flight (the fake model sent the reply's
  first chunk and holds the rest until the caller goes away), a seeded 0-0.3 s after
  the request arrived;
- ``answered``: the moment the continued turn's answer row is in the database (its turn
  may or may not have been recorded finished).

The remaining server then closes the turn as recovery closes any turn whose holder is
gone (docs/concurrency.md, "Crash recovery"): ``interrupted``, with every call it made
answered (here all were: A stored the command's result before it handed over), or the
turn had ended ``end_turn`` before the kill. Checked, for every kill point: one turn; it
ended as said; the command ran once and its real result is stored (not "outcome
unknown"); every tool_use has exactly one result; the model was asked for the turn's
first step once, and for the step after the command's result at most once (once when the
kill came during or after that call): recovery does not make a model call again, so a
reply that was never stored is not asked for again either; nothing is left running; a
stream of ``/events`` open on the remaining server saw each row once, in order; a new
message then runs to ``end_turn`` on the remaining server, after the closed turn (no
two turns overlap).
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.fake_model import SEEDS, AnsweringChat, Stream, _text  # (fakes.server's)
from tests.e2e.invariants import (
    Row,
    overlapping_turns,
    query,
    result_text,
    results_for,
    running_in_db,
    tool_pairs,
    tool_uses,
    turn_endings,
)
from tests.e2e.server import Server, SSEReader
from tests.e2e.test_handover import three_servers

SEED = int(os.environ.get("OSTINATO_HANDOVER_SEED", "33"))
KILL_POINTS = ("claimed", "model-call", "answered")
WAIT = 60.0
HOLDER = (
    "SELECT turns.holder, servers.pid, turns.status FROM turns"
    " LEFT JOIN servers ON servers.id = turns.holder WHERE turns.conversation_id = :c"
)
ANSWERS = (
    "SELECT count(*) FROM messages WHERE conversation_id = :c AND role = 'assistant'"
    " AND NOT hidden AND blocks NOT LIKE '%tool_use%'"
)


def answers_a_call(body: dict[str, Any]) -> bool:
    """Whether a request asks for the step after the model's own call was answered (not
    after a seed call the turn made by itself: ``fake_model.SEEDS``)."""
    messages = body.get("messages") or []
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    since = messages[users[-1] + 1 :] if users else messages
    called = {
        c["function"]["name"]
        for m in since
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or []
    }
    return bool(called - SEEDS) and messages[-1].get("role") == "tool"


class HoldingChat(AnsweringChat):
    """The fake model; with ``hold``, a reply to a step after a tool result sends its
    first chunk and then nothing until the caller goes away (a call in flight)."""

    def __init__(self, hold: bool) -> None:
        super().__init__()
        self.hold = hold

    def respond(self, body: dict[str, Any]) -> Stream:
        reply = super().respond(body)
        if self.hold and answers_a_call(body):
            return Stream(reply.events[:2], hang=True)
        return reply


def wait_for(what: str, ready: Any, servers: list[Server]) -> Any:
    """Poll ``ready()`` until it returns something true; that."""
    deadline = time.monotonic() + WAIT
    while not (got := ready()):
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {s.log.name}\n{s.tail(30)}" for s in servers)
            raise AssertionError(f"{what}: not within {WAIT} s\n{logs}")
        time.sleep(0.01)
    return got


def taker(cid: str, database_url: str, before: str) -> tuple[str, int] | None:
    """The holder that claimed the handed-over turn and its server's pid, once one has."""
    [(holder, pid, _)] = query(database_url, HOLDER, cid)
    if holder is None or holder == before or holder.startswith("handed:") or pid is None:
        return None
    return holder, pid


def kill_mid_hand_over(
    point: str, rng: random.Random, fake: HoldingChat, servers: list[Server], cid: str, before: str
) -> Server:
    """SIGKILL the server that took the turn over, at ``point``; the server killed."""
    url = servers[0].database_url
    if point == "claimed":
        wait_for("a claim of the turn", lambda: taker(cid, url, before), servers)
    elif point == "model-call":
        wait_for("the model call", lambda: any(answers_a_call(r) for r in fake.requests), servers)
        time.sleep(rng.uniform(0.0, 0.3))
    else:
        wait_for("the answer row", lambda: query(url, ANSWERS, cid)[0][0] > 0, servers)
    _, pid = wait_for("the taker", lambda: taker(cid, url, before), servers)
    [server] = [s for s in servers if s.pid == pid]
    asked = sum(answers_a_call(r) for r in fake.requests)
    server.kill()
    print(f"\n{point}: killed with {asked} model call(s) of the continued turn made")
    return server


def watch(server: Server, cid: str) -> SSEReader:
    reader = server.stream("GET", f"/v1/conversations/{cid}/events?deltas=false")
    reader.started_event.wait(WAIT)
    return reader


def steps(fake: HoldingChat, call_id: str) -> tuple[int, int]:
    """How many times the model was asked for the turn's first step (its last user
    message is the ``/tool`` one; a seed call's result may follow it) and for the step
    after the command's result."""
    first = after = 0
    for body in fake.requests:
        messages = body["messages"]
        users = [m for m in messages if m.get("role") == "user"]
        said = _text(users[-1].get("content")) if users else ""
        if answers_a_call(body):
            after += messages[-1].get("tool_call_id") == call_id
        elif said.startswith("/tool"):
            first += 1
    return first, after


@pytest.mark.parametrize("point", KILL_POINTS)
def test_the_server_taking_a_turn_over_is_killed_mid_hand_over(point: str, tmp_path: Path) -> None:
    rng = random.Random(f"{SEED}-{point}")
    with HoldingChat(hold=point != "answered") as fake, three_servers(tmp_path, fake) as servers:
        a, b, c = servers
        marks = tmp_path / "marks.txt"
        cid = a.post("/v1/conversations", {}).json()["id"]
        watchers = {s.log.name: watch(s, cid) for s in (b, c)}
        command = f"echo ran >> {marks}; sleep 2"
        text = f"/tool shell {json.dumps({'command': command, 'timeout': 60})}"
        post = a.stream("POST", f"/v1/conversations/{cid}/turns", {"text": text})
        approval = post.until_type("approval.requested", WAIT).data["approval_id"]
        b.post(f"/v1/conversations/{cid}/approvals/{approval}", {"decision": "approve"})
        post.until_type("approval.decided", WAIT)  # the command runs from here, for 2 s
        [(holder_a, _, _)] = query(a.database_url, HOLDER, cid)
        assert a.pid is not None
        os.kill(a.pid, signal.SIGTERM)  # while the command runs
        killed = kill_mid_hand_over(point, rng, fake, servers, cid, holder_a)
        wait_for("A's exit", lambda: not a.alive(), servers)
        a.pid = None
        [survivor] = [s for s in (b, c) if s is not killed]
        check_the_turn(point, fake, survivor, cid, marks, watchers[survivor.log.name])


def check_the_turn(
    point: str, fake: HoldingChat, survivor: Server, cid: str, marks: Path, watcher: SSEReader
) -> None:
    url = survivor.database_url
    wait_for("the turn's end", lambda: query(url, HOLDER, cid)[0][2] != "running", [survivor])
    [stop] = turn_endings(url, cid)  # one turn
    path = f"/v1/conversations/{cid}/messages?include_hidden=true"
    rows: list[Row] = survivor.get(path).json()["messages"]
    [call] = [u for r in rows for u in tool_uses(r) if u["name"] == "shell"]
    [result] = results_for(rows, call["id"])
    assert "outcome unknown" not in result_text(result) and not result.get("is_error")
    assert marks.read_text().split() == ["ran"]  # the command ran once
    answered = [
        r for r in rows if r["role"] == "assistant" and not r["hidden"] and not tool_uses(r)
    ]
    first, after = steps(fake, call["id"])
    if point == "answered":
        assert stop in ("end_turn", "interrupted") and len(answered) == 1
        assert (first, after) == (1, 1)
    else:  # the reply was held: never stored, and not asked for again
        assert stop == "interrupted" and answered == []
        assert first == 1 and after == (1 if point == "model-call" else min(after, 1))
    assert not fake.violations
    assert tool_pairs(rows) == [] and running_in_db(url, cid) == []
    [(holder, pid, _)] = query(url, HOLDER, cid)
    if stop == "interrupted":  # closed by the survivor's recovery, which claimed it
        assert pid == survivor.pid, (holder, pid, survivor.pid)
    answer = survivor.post(f"/v1/conversations/{cid}/turns", {"text": "after"})
    assert answer.status_code == 200 and answer.json()["stop_reason"] == "end_turn", answer.text
    assert turn_endings(url, cid) == [stop, "end_turn"] and overlapping_turns(url, cid) == []
    assert steps(fake, call["id"]) == (first, after) and marks.read_text().split() == ["ran"]
    rows = survivor.get(path).json()["messages"]
    assert tool_pairs(rows) == [] and running_in_db(url, cid) == []
    seen = lambda: [f.data["message"]["seq"] for f in watcher.frames if f.event == "message"]  # noqa: E731
    wait_for("every row on the stream", lambda: len(seen()) >= len(rows), [survivor])
    assert seen() == [r["seq"] for r in rows]  # each row once, in order
    kinds = [f.event for f in watcher.frames]
    assert kinds.count("turn.started") == 2 and 1 <= kinds.count("turn.finished") <= 2
    print(f"\n{point}: stop {stop}, model asked {first} + {after}, answer rows {len(answered)}")
