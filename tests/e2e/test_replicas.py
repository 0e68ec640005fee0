"""Several ``ostinato serve`` processes on one PostgreSQL database (issue 16), as real
processes: a stream opened on one server sees the turn a message posted to another runs,
every committed row once and in order, and the live deltas."""

from __future__ import annotations

import importlib.util
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

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


@pytest.fixture(params=["notify", "redis"])
def two_servers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[Server]]:
    """Two serve processes on one PostgreSQL database; frames between them by NOTIFY, or
    by Redis pub/sub (on a channel of this test's own)."""
    extra = {"OSTINATO_SERVER__FANOUT_CHANNEL": f"test_{uuid.uuid4().hex[:12]}"}
    if request.param == "redis":
        url = os.environ.get("OSTINATO_TEST_REDIS_URL")
        if not url or importlib.util.find_spec("redis") is None:
            pytest.skip("needs OSTINATO_TEST_REDIS_URL and the redis package")
        extra["OSTINATO_SERVER__REDIS_URL"] = url
    with scratch_postgres() as url, AnsweringChat() as fake:
        servers = [
            Server(url, tmp_path / f"data{i}", tmp_path / f"serve{i}.log", _env(fake) | extra)
            for i in (0, 1)
        ]
        try:
            for server in servers:
                server.start()
            yield servers
        finally:
            for server in servers:
                if server.alive():
                    server.terminate()


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
