"""Several ``ostinato serve`` processes on one PostgreSQL database (issue 16), as real
processes: a stream opened on one server sees the turn a message posted to another runs,
every committed row once and in order, and the live deltas."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.fake_model import AnsweringChat
from tests.e2e.server import Server
from tests.e2e.test_fault_injection import scratch_postgres

WAIT = 30.0


TTL = "2"  # seconds: a SIGKILLed server's lease (same machine: judged at the next sweep)


def _env(fake: AnsweringChat) -> dict[str, str]:
    return {
        "OSTINATO_MODEL": "openai-chat:fake-model",
        "OPENAI_BASE_URL": f"{fake.url}/v1",
        "OPENAI_API_KEY": "k",
        "OSTINATO_SERVER__LEASE_TTL_S": TTL,
    }


def _turns(server: Server, cid: str, count: int) -> list[dict[str, object]]:
    """The conversation's turns once ``count`` of them have finished (polled)."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        turns: list[dict[str, object]] = server.get(f"/v1/conversations/{cid}/turns").json()[
            "turns"
        ]
        if sum(t["status"] == "finished" for t in turns) >= count:
            return turns
        time.sleep(0.1)
    raise AssertionError(f"fewer than {count} turns finished within {WAIT} s")


def _results(rows: list[dict[str, Any]], tool_use_id: str) -> list[dict[str, Any]]:
    """The tool_result blocks answering one call (a turn's memory recall has its own)."""
    return [
        block
        for row in rows
        for block in row["blocks"]
        if block["type"] == "tool_result" and block["tool_use_id"] == tool_use_id
    ]


@contextlib.contextmanager
def _servers(transport: str, tmp_path: Path, count: int) -> Iterator[list[Server]]:
    """``count`` serve processes on one PostgreSQL database; frames between them by
    NOTIFY, or by Redis pub/sub (on a channel of this test's own)."""
    extra = {"OSTINATO_SERVER__FANOUT_CHANNEL": f"test_{uuid.uuid4().hex[:12]}"}
    if transport == "redis":
        url = os.environ.get("OSTINATO_TEST_REDIS_URL")
        if not url or importlib.util.find_spec("redis") is None:
            pytest.skip("needs OSTINATO_TEST_REDIS_URL and the redis package")
        extra["OSTINATO_SERVER__REDIS_URL"] = url
    with scratch_postgres() as url, AnsweringChat() as fake:
        servers = [
            Server(url, tmp_path / f"data{i}", tmp_path / f"serve{i}.log", _env(fake) | extra)
            for i in range(count)
        ]
        try:
            for server in servers:
                server.start()
            yield servers
        finally:
            for server in servers:
                if server.alive():
                    server.terminate()


@pytest.fixture(params=["notify", "redis"])
def two_servers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[Server]]:
    with _servers(request.param, tmp_path, 2) as servers:
        yield servers


@pytest.fixture(params=["notify", "redis"])
def three_servers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[Server]]:
    with _servers(request.param, tmp_path, 3) as servers:
        yield servers


def test_a_stream_on_one_server_sees_a_turn_posted_to_another(two_servers: list[Server]) -> None:
    a, b = two_servers
    cid = a.post("/v1/conversations", {}).json()["id"]
    watcher = b.stream("GET", f"/v1/conversations/{cid}/events")
    assert watcher.started_event.wait(WAIT) and watcher.status == 200  # subscribed
    posted = a.post(f"/v1/conversations/{cid}/turns", {"text": "/slow 5"})
    assert posted.status_code == 200, posted.text
    seen = []
    while True:
        frame = watcher.next_frame(WAIT)
        seen.append(frame)
        if frame.event == "turn.finished":
            break
    rows = b.get(f"/v1/conversations/{cid}/messages?include_hidden=true").json()["messages"]
    committed = [f.data["message"]["seq"] for f in seen if f.event == "message"]
    assert committed == [r["seq"] for r in rows]  # every row once, in order, no gap
    assert sum(f.event == "text.delta" for f in seen) >= 5  # the live deltas reached b


def test_a_sigkilled_servers_turn_is_recovered_and_its_queue_run_by_another(
    two_servers: list[Server],
) -> None:
    a, b = two_servers
    cid = a.post("/v1/conversations", {}).json()["id"]
    turns = f"/v1/conversations/{cid}/turns"
    running = a.stream("POST", turns, {"text": "/slow 400"})
    running.until_type("text.delta", WAIT)
    waiting = a.stream("POST", turns, {"text": "after the crash"})
    waiting.until_type("input.queued", WAIT)
    a.kill()
    first, second = _turns(b, cid, 2)
    assert first["stop_reason"] == "interrupted"  # as a restart of a would have closed it
    assert second["stop_reason"] == "end_turn"  # the queued message ran on b
    rows = b.get(f"/v1/conversations/{cid}/messages").json()["messages"]
    texts = [blk.get("text") for r in rows if r["role"] == "user" for blk in r["blocks"]]
    assert texts == ["/slow 400", "after the crash"]  # each stored once


def test_stream_on_a_message_on_b_approval_on_c_runs_the_call_once(
    three_servers: list[Server], tmp_path: Path
) -> None:
    a, b, c = three_servers
    cid = a.post("/v1/conversations", {}).json()["id"]
    watcher = a.stream("GET", f"/v1/conversations/{cid}/events")
    assert watcher.started_event.wait(WAIT) and watcher.status == 200  # the only surface
    ran = tmp_path / "ran.txt"
    command = json.dumps({"command": f"echo ran >> {ran}", "timeout": 60})
    sent = b.stream("POST", f"/v1/conversations/{cid}/turns", {"text": f"/tool shell {command}"})
    asked = watcher.until_type("approval.requested", WAIT).data  # asked on b, seen on a
    path = f"/v1/conversations/{cid}/approvals/{asked['approval_id']}"
    decided = c.post(path, {"decision": "approve"})
    assert decided.status_code == 200, decided.text
    assert c.post(path, {"decision": "approve"}).status_code == 409  # once, whoever asks
    finished = sent.until_type("turn.finished", WAIT).data
    assert finished["stop_reason"] == "end_turn"
    seen = []
    while True:
        frame = watcher.next_frame(WAIT)
        seen.append(frame)
        if frame.event == "turn.finished":
            break
    assert ran.read_text() == "ran\n"  # the tool ran once
    rows = a.get(f"/v1/conversations/{cid}/messages?include_hidden=true").json()["messages"]
    committed = [f.data["message"]["seq"] for f in watcher.frames if f.event == "message"]
    assert committed == [r["seq"] for r in rows]  # every row once, in order, on a
    assert any(f.event == "tool.finished" for f in seen)


def test_a_tool_running_on_a_killed_server_is_outcome_unknown_and_never_run_again(
    two_servers: list[Server], tmp_path: Path
) -> None:
    """Failover (issue 16 item 4): an approved command runs on a; a is SIGKILLed; b
    recovers the turn after a's lease: the call's result says its outcome is unknown,
    and nothing runs it again (a later message on b runs, the command does not)."""
    a, b = two_servers
    cid = a.post("/v1/conversations", {}).json()["id"]
    ran = tmp_path / "ran.txt"
    command = json.dumps({"command": f"echo ran >> {ran}; sleep 30", "timeout": 60})
    sent = a.stream("POST", f"/v1/conversations/{cid}/turns", {"text": f"/tool shell {command}"})
    asked = sent.until_type("approval.requested", WAIT).data
    path = f"/v1/conversations/{cid}/approvals/{asked['approval_id']}"
    assert b.post(path, {"decision": "approve"}).status_code == 200  # decided on b
    deadline = time.monotonic() + WAIT
    while not ran.exists():  # the command runs, on a
        assert time.monotonic() < deadline, "the approved command did not start"
        time.sleep(0.05)
    a.kill()
    (turn,) = _turns(b, cid, 1)
    assert turn["stop_reason"] == "interrupted"
    rows = b.get(f"/v1/conversations/{cid}/messages?include_hidden=true").json()["messages"]
    results = _results(rows, asked["tool_use_id"])
    assert len(results) == 1, results  # one result for the call
    assert results[0]["content"].startswith("outcome unknown") and results[0]["is_error"]
    after = b.post(f"/v1/conversations/{cid}/turns", {"text": "and now?"})
    assert after.status_code == 200 and after.json()["stop_reason"] == "end_turn"
    time.sleep(1.0)  # a re-run would have written by now
    assert ran.read_text() == "ran\n"  # once, and never again


def test_a_card_asked_on_one_server_is_answered_on_another(three_servers: list[Server]) -> None:
    """A question card shown by a turn on a, answered on b (issue 16 item 3): the turn
    resumes with the answer, once, and a stream on c sees every row."""
    a, b, c = three_servers
    cid = a.post("/v1/conversations", {}).json()["id"]
    watcher = c.stream("GET", f"/v1/conversations/{cid}/events?deltas=false")
    assert watcher.started_event.wait(WAIT) and watcher.status == 200
    card = '/tool ask_user {"question": "Which colour?", "options": ["red", "blue"]}'
    asked = a.post(f"/v1/conversations/{cid}/turns", {"text": card})
    assert asked.status_code == 200 and asked.json()["stop_reason"] == "paused"
    (row,) = [m for m in asked.json()["messages"] if m["metadata"].get("awaiting")]
    answer = {"tool_use_id": row["metadata"]["awaiting"], "result": {"choice": "blue"}}
    resumed = b.post(f"/v1/conversations/{cid}/turns", {"tool_response": answer})
    assert resumed.status_code == 200 and resumed.json()["stop_reason"] == "end_turn"
    again = b.post(f"/v1/conversations/{cid}/turns", {"tool_response": answer})
    assert again.status_code in (404, 409), again.text  # answered once
    rows = c.get(f"/v1/conversations/{cid}/messages?include_hidden=true").json()["messages"]
    results = _results(rows, answer["tool_use_id"])
    assert [json.loads(r["content"]) for r in results] == [{"choice": "blue"}]
    deadline = time.monotonic() + WAIT
    while [f.data["message"]["seq"] for f in watcher.frames if f.event == "message"] != [
        r["seq"] for r in rows
    ]:
        assert time.monotonic() < deadline, "the stream on c missed rows"
        time.sleep(0.05)
