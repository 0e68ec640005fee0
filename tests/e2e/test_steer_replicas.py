"""Steering across two ``ostinato serve`` processes on one PostgreSQL database: a message
sent to b with ``policy: "steer"`` while a turn runs on a is taken by a's turn at its next
step boundary (a reads the store there), so a's next model call answers it, in the same
turn; b's request, which has no turn of its own to follow, is answered with a conflict."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.e2e.server import Server
from tests.e2e.test_replicas import WAIT, _servers, _turns


def test_a_message_steered_on_b_is_answered_by_the_turn_running_on_a(tmp_path: Path) -> None:
    with _servers("notify", tmp_path, 2) as (a, b):
        _steer_across(a, b, tmp_path)


def _steer_across(a: Server, b: Server, tmp_path: Path) -> None:
    cid = a.post("/v1/conversations", {}).json()["id"]
    started = tmp_path / "started"
    command = json.dumps({"command": f"touch {started}; sleep 3", "timeout": 60})
    running = a.stream("POST", f"/v1/conversations/{cid}/turns", {"text": f"/tool shell {command}"})
    asked = running.until_type("approval.requested", WAIT).data
    path = f"/v1/conversations/{cid}/approvals/{asked['approval_id']}"
    assert a.post(path, {"decision": "approve"}).status_code == 200
    deadline = time.monotonic() + WAIT
    while not started.exists():  # the command runs, on a: a tool call is in progress
        assert time.monotonic() < deadline, "the approved command did not start"
        time.sleep(0.05)
    body = {"text": "/slow 3", "policy": "steer", "client_message_id": "from-b"}
    steered = b.stream("POST", f"/v1/conversations/{cid}/turns", body)
    queued = steered.until_type("input.queued", WAIT).data
    assert queued["steer"] is True
    listed = b.get(f"/v1/conversations/{cid}/queue").json()["queued"]
    assert [q["id"] for q in listed] == [queued["queued_id"]] and listed[0]["steer"]
    finished = running.until_type("turn.finished", WAIT).data
    assert finished["stop_reason"] == "end_turn"
    refused = steered.until_type("error", WAIT).data  # b had no turn to follow
    assert refused["code"] == "conflict"
    (turn,) = _turns(b, cid, 1)  # one turn: the steered message did not run on its own
    assert turn["run_id"] == finished["run_id"]
    rows = b.get(f"/v1/conversations/{cid}/messages?include_hidden=true").json()["messages"]
    tail = [(r["role"], r["metadata"].get("steered")) for r in rows][-3:]
    assert tail == [("tool", None), ("user", True), ("assistant", None)]
    assert rows[-2]["metadata"]["client_message_id"] == "from-b"
    answer = " ".join(k["text"] for k in rows[-1]["blocks"] if k["type"] == "text").split()
    assert answer == ["w0", "w1", "w2"]  # a's next model call answered the steered text
    assert b.get(f"/v1/conversations/{cid}/queue").json()["queued"] == []
