"""Hand-over on SIGTERM (issue 33, ``ostinato.handover``): three ``ostinato serve``
processes on one PostgreSQL database. A turn runs on A: the model calls ``shell`` (a
command that takes a couple of seconds); A gets SIGTERM while the command runs. The
command finishes on A, A hands the turn over at the step boundary after it and exits,
and B or C goes on with the same turn: its last model call is made there.

Checked: one turn, ended ``end_turn`` and held by B or C at the end; the command ran once;
the model was asked twice for the conversation (no call repeated); every tool_use has
exactly one result; nothing is left running; a stream of ``/events`` open on B saw each
row once, in order, and the turn's start and finish once each; the after-turn work (a
title, then the fact extraction, each a model call) ran once, where the turn ended.

``three_servers`` is shared with ``test_handover_faults.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ostinato.memory.extraction import EXTRACT_PROMPT
from ostinato.titles import TITLE_PROMPT
from tests.e2e.fake_model import AnsweringChat
from tests.e2e.invariants import query, running_in_db, tool_pairs
from tests.e2e.server import ForkServer, Server
from tests.e2e.test_fault_injection import scratch_postgres

WAIT = 60.0
HOLDERS = "SELECT turns.holder, turns.stop_reason FROM turns WHERE conversation_id = :c"


ENV = {
    "OSTINATO_MODEL": "openai-chat:fake-model",
    "OPENAI_API_KEY": "k",
    "OSTINATO_SERVER__LEASE_TTL_S": "3",
    "OSTINATO_SERVER__SHUTDOWN_GRACE_S": "30",
    # the after-turn work asks the model too, so its requests can be counted
    "OSTINATO_DATA__TITLES": "conversation",
    "OSTINATO_MEMORY__EXTRACT_FACTS": "true",
    "OSTINATO_MODELS__SUMMARIZER": "openai-chat:fake-model",
}


@contextlib.contextmanager
def three_servers(tmp_path: Path, fake: AnsweringChat) -> Iterator[list[Server]]:
    """Three ``ostinato serve`` processes on one scratch PostgreSQL database, talking to
    ``fake``; every one is killed at the end, whatever happened."""
    with scratch_postgres() as url:
        env = {
            **ENV,
            "OPENAI_BASE_URL": f"{fake.url}/v1",
            "OSTINATO_SERVER__FANOUT_CHANNEL": f"test_{uuid.uuid4().hex[:12]}",
        }
        pooled = f"{url}?pool_size=3&max_overflow=4"
        forks = ForkServer()  # ostinato imported once: three starts cost one
        servers = [
            Server(pooled, tmp_path / f"data{i}", tmp_path / f"serve{i}.log", env, forks=forks)
            for i in range(3)
        ]
        try:
            for server in servers:
                server.start()
            yield servers
        finally:
            for server in servers:
                server.kill()
            forks.close()


@pytest.fixture
def three(tmp_path: Path) -> Iterator[tuple[list[Server], AnsweringChat]]:
    with AnsweringChat() as fake, three_servers(tmp_path, fake) as servers:
        yield servers, fake


def after_turn_work(request: dict[str, Any]) -> str | None:
    """Which after-turn work a model request is (``title``, ``facts``), or None: a step."""
    system = next((m for m in request["messages"] if m.get("role") == "system"), {})
    prompt = system.get("content")
    return {TITLE_PROMPT: "title", EXTRACT_PROMPT: "facts"}.get(prompt) if prompt else None


def sigterm(server: Server) -> None:
    """SIGTERM the server (a graceful stop) and wait for it to exit."""
    assert server.pid is not None
    os.kill(server.pid, signal.SIGTERM)
    deadline = time.monotonic() + WAIT
    while server.alive():
        assert time.monotonic() < deadline, f"no exit after SIGTERM:\n{server.tail()}"
        time.sleep(0.05)
    server.pid = None


def test_sigterm_mid_turn_hands_the_turn_to_another_server(
    three: tuple[list[Server], AnsweringChat], tmp_path: Path
) -> None:
    (a, b, _), fake = three
    marks = tmp_path / "marks.txt"
    cid = a.post("/v1/conversations", {}).json()["id"]
    watcher = b.stream("GET", f"/v1/conversations/{cid}/events?deltas=false")
    watcher.started_event.wait(WAIT)
    command = f"echo ran >> {marks}; sleep 2"
    text = f"/tool shell {json.dumps({'command': command, 'timeout': 60})}"
    post = a.stream("POST", f"/v1/conversations/{cid}/turns", {"text": text})
    asked = post.until_type("approval.requested", WAIT)
    approval = asked.data["approval_id"]
    b.post(f"/v1/conversations/{cid}/approvals/{approval}", {"decision": "approve"})
    post.until_type("approval.decided", WAIT)  # the command runs from here, for 2 s
    holder_a = query(a.database_url, HOLDERS, cid)[0][0]
    sigterm(a)  # while the command runs

    turn = watcher.until_type("turn.finished", WAIT)
    assert turn.data["stop_reason"] == "end_turn", b.tail()
    rows = b.get(f"/v1/conversations/{cid}/messages?include_hidden=true").json()["messages"]
    [(holder, stop)] = query(b.database_url, HOLDERS, cid)  # one turn
    assert stop == "end_turn" and holder not in (None, holder_a)
    assert marks.read_text().split() == ["ran"]  # the command ran once
    asked_model = [
        r for r in fake.requests if str(marks) in json.dumps(r) and not after_turn_work(r)
    ]
    assert len(asked_model) == 2, [r["messages"][-1] for r in asked_model]  # none repeated
    assert not fake.violations
    assert tool_pairs(rows) == [] and running_in_db(b.database_url, cid) == []
    deadline = time.monotonic() + WAIT
    while len([f for f in watcher.frames if f.event == "message"]) < len(rows):
        assert time.monotonic() < deadline, "the stream on B missed rows"
        time.sleep(0.05)
    seen = [f.data["message"]["seq"] for f in watcher.frames if f.event == "message"]
    assert seen == [r["seq"] for r in rows]  # each row once, in order
    kinds = [f.event for f in watcher.frames]
    assert kinds.count("turn.started") == 1 and kinds.count("turn.finished") == 1
    # the after-turn work (a title, then facts) ran once, where the turn ended: A's
    # task ended with the hand-over, so only the continued turn's end starts it
    deadline = time.monotonic() + WAIT
    while (title := b.get(f"/v1/conversations/{cid}").json()["title"]) is None or len(
        [r for r in fake.requests if after_turn_work(r) == "facts"]
    ) < 1:
        assert time.monotonic() < deadline, f"no after-turn work:\n{b.tail()}"
        time.sleep(0.05)
    works = [after_turn_work(r) for r in fake.requests if after_turn_work(r)]
    assert works == ["title", "facts"] and title.startswith("ok: Person: /tool shell")
