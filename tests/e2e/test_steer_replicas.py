"""Steering across two ``ostinato serve`` processes on one PostgreSQL database: messages
sent to b with ``policy: "steer"`` while a turn runs on a are taken by a's turn at its next
step boundary (a reads the store there), so a's next model call answers them, in the same
turn; b's requests follow that turn as if it ran on b: the streamed one carries a's frames
from its steered row to a's ``turn.finished``, the JSON one answers a's turn's result."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.e2e.server import Server
from tests.e2e.test_replicas import WAIT, _servers, _turns


def test_a_message_steered_on_b_is_answered_by_the_turn_running_on_a(tmp_path: Path) -> None:
    with _servers("notify", tmp_path, 2) as (a, b):
        _steer_across(a, b, tmp_path)


def _steer_across(a: Server, b: Server, tmp_path: Path) -> None:
    cid = a.post("/v1/conversations", {}).json()["id"]
    started, go = tmp_path / "started", tmp_path / "go"
    script = f"touch {started}; while [ ! -f {go} ]; do sleep 0.05; done"
    command = json.dumps({"command": script, "timeout": 60})
    running = a.stream("POST", f"/v1/conversations/{cid}/turns", {"text": f"/tool shell {command}"})
    asked = running.until_type("approval.requested", WAIT).data
    path = f"/v1/conversations/{cid}/approvals/{asked['approval_id']}"
    assert a.post(path, {"decision": "approve"}).status_code == 200
    _wait_for(started.exists, "the approved command did not start")  # a tool call runs on a
    with ThreadPoolExecutor(1) as pool:
        body = {"text": "and mind the tests", "policy": "steer", "client_message_id": "b-json"}
        answered = pool.submit(b.post, f"/v1/conversations/{cid}/turns", body)
        _wait_for(lambda: len(_queued(b, cid)) == 1, "the JSON message was not queued")
        body = {"text": "/slow 3", "policy": "steer", "client_message_id": "from-b"}
        steered = b.stream("POST", f"/v1/conversations/{cid}/turns", body)
        queued = steered.until_type("input.queued", WAIT).data
        assert queued["steer"] is True
        listed = _queued(b, cid)
        assert [q["id"] for q in listed][1:] == [queued["queued_id"]] and listed[1]["steer"]
        go.touch()  # the command ends: a's turn takes both at its step boundary
        finished = running.until_type("turn.finished", WAIT).data
        assert finished["stop_reason"] == "end_turn"
        followed = [steered.next_frame(WAIT)]  # b's stream follows a's turn
        while followed[-1].event not in ("turn.finished", "error"):
            followed.append(steered.next_frame(WAIT))
        result = answered.result(timeout=WAIT)
    last = followed[-1]
    assert last.event == "turn.finished", last.data
    assert (last.data["turn_id"], last.data["stop_reason"]) == (finished["turn_id"], "end_turn")
    assert {f.data["run_id"] for f in followed} == {finished["run_id"]}
    rows_seen = [f.data["message"] for f in followed if f.event == "message"]
    said = [(m["role"], m["metadata"].get("client_message_id")) for m in rows_seen][-3:]
    assert said == [("user", "b-json"), ("user", "from-b"), ("assistant", None)]
    assert result.status_code == 200, result.text
    out = result.json()  # b's JSON request answers a's turn, from its steered row on
    assert (out["run_id"], out["turn_id"]) == (finished["run_id"], finished["turn_id"])
    assert out["stop_reason"] == "end_turn" and out["queued_position"] is not None
    assert [m["metadata"].get("client_message_id") for m in out["messages"]][:2] == [
        "b-json",
        "from-b",
    ]
    (turn,) = _turns(b, cid, 1)  # one turn: the steered messages did not run on their own
    assert turn["run_id"] == finished["run_id"]
    rows = b.get(f"/v1/conversations/{cid}/messages?include_hidden=true").json()["messages"]
    tail = [(r["role"], r["metadata"].get("steered")) for r in rows][-4:]
    assert tail == [("tool", None), ("user", True), ("user", True), ("assistant", None)]
    assert rows[-2]["metadata"]["client_message_id"] == "from-b"
    assert rows[-2]["metadata"]["queued_id"] == queued["queued_id"]
    answer = " ".join(k["text"] for k in rows[-1]["blocks"] if k["type"] == "text").split()
    assert answer == ["w0", "w1", "w2"]  # a's next model call answered the steered text
    assert _queued(b, cid) == []


def _queued(server: Server, cid: str) -> list[dict[str, object]]:
    queued: list[dict[str, object]] = server.get(f"/v1/conversations/{cid}/queue").json()["queued"]
    return queued


def _wait_for(condition: Callable[[], bool], failure: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, failure
        time.sleep(0.05)
