"""The proof of issue 16: three ``ostinato serve`` processes on one PostgreSQL database,
every request sent to a server picked at random (the message on one, the streams on
every one), servers killed with SIGKILL at random points and started again, over NOTIFY
and over Redis. Checked at the end, once everything accepted has run:

- no two turns of one conversation overlap (each begins after the one before ended);
- every message a server accepted is stored once (one whose server died before it
  answered: at most once);
- every surface (an ``/events`` stream on each server for each conversation, reconnected
  from its last seq when its stream ends while its server lives) saw each committed row
  at most once and in order, and one whose server lived to the end saw every row.

Seeded (``OSTINATO_REPLICAS_SEED``); bounded: ``ROUNDS`` messages, ``KILLS`` kills.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import random
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from tests.e2e.fake_model import AnsweringChat
from tests.e2e.server import Server, SSEReader
from tests.e2e.test_fault_injection import scratch_postgres

SEED = int(os.environ.get("OSTINATO_REPLICAS_SEED", "16"))
ROUNDS = 14
KILLS = 3
CONVERSATIONS = 3
WAIT = 60.0


class Watcher:
    """One surface: a stream of one conversation's rows on one server (for as long as
    that server lives), reconnected from its last seq when the stream ends."""

    def __init__(self, server: Server, cid: str) -> None:
        self.server, self.cid = server, cid
        self.seqs: list[int] = []
        self.reader = self._open(0)
        self._read = 0

    def _open(self, after: int) -> SSEReader:
        path = f"/v1/conversations/{self.cid}/events?deltas=false&after_seq={after}"
        reader = self.server.stream("GET", path)
        reader.started_event.wait(WAIT)
        return reader

    def collect(self, *, reconnect: bool) -> None:
        frames = self.reader.frames
        while self._read < len(frames):
            frame = frames[self._read]
            self._read += 1
            if frame.event == "message":
                self.seqs.append(frame.data["message"]["seq"])
        if reconnect and not self.reader.is_alive():
            self.reader = self._open(self.seqs[-1] if self.seqs else 0)
            self._read = 0


class Cluster:
    def __init__(self, servers: list[Server], rng: random.Random) -> None:
        self.servers, self.rng = servers, rng
        self.cids = [servers[0].post("/v1/conversations", {}).json()["id"] for _ in range(3)]
        self.watchers: list[tuple[Watcher, Server]] = []
        self.ended: list[Watcher] = []  # watchers whose server was killed
        self.accepted: dict[str, str] = {}  # text -> conversation
        self.maybe: dict[str, str] = {}
        self.posts: list[tuple[str, str, SSEReader]] = []
        for server in servers:
            self.watch(server)

    def watch(self, server: Server) -> None:
        self.watchers += [(Watcher(server, cid), server) for cid in self.cids]

    def alive(self) -> list[Server]:
        return [s for s in self.servers if s.pid is not None]

    def post(self, n: int) -> None:
        server, cid = self.rng.choice(self.alive()), self.rng.choice(self.cids)
        text = f"/slow {self.rng.randint(1, 12)} m{n}"
        reader = server.stream("POST", f"/v1/conversations/{cid}/turns", {"text": text})
        self.posts.append((text, cid, reader))
        deadline = time.monotonic() + WAIT
        while not reader.frames and reader.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)  # until it is accepted (its first frame) or refused

    def kill(self) -> Server:
        victim = self.rng.choice(self.alive())
        victim.kill()
        for watcher, server in list(self.watchers):
            if server is victim:
                watcher.collect(reconnect=False)
                self.ended.append(watcher)
                self.watchers.remove((watcher, server))
        return victim

    def sort_posts(self) -> None:
        for text, cid, reader in self.posts:
            first = reader.frames[0].event if reader.frames else None
            if first in ("turn.started", "input.queued"):
                self.accepted[text] = cid
            elif reader.status in (None, 200):
                self.maybe[text] = cid  # its server died before it answered


def _rows(server: Server, cid: str) -> list[dict[str, object]]:
    url = f"/v1/conversations/{cid}/messages?include_hidden=true&limit=1000"
    rows: list[dict[str, object]] = server.get(url).json()["messages"]
    return rows


def _settled(cluster: Cluster) -> bool:
    server = cluster.alive()[0]
    for cid in cluster.cids:
        turns = server.get(f"/v1/conversations/{cid}/turns").json()["turns"]
        if any(t["status"] != "finished" for t in turns):
            return False
        users = [r for r in _rows(server, cid) if r["role"] == "user"]
        if len(users) < sum(c == cid for c in cluster.accepted.values()):
            return False
    return True


def _check(cluster: Cluster) -> list[str]:
    problems: list[str] = []
    server = cluster.alive()[0]
    for cid in cluster.cids:
        turns = server.get(f"/v1/conversations/{cid}/turns").json()["turns"]
        spans = sorted((t["started_at"], t["finished_at"], t["id"]) for t in turns)
        for (_, ended, before), (began, _, after) in itertools.pairwise(spans):
            if datetime.fromisoformat(began) < datetime.fromisoformat(ended):
                problems.append(f"{cid}: turn {after} began before {before} ended")
        rows = _rows(server, cid)
        texts = [b.get("text") for r in rows if r["role"] == "user" for b in r["blocks"]]  # type: ignore[attr-defined]
        for text, where in cluster.accepted.items():
            if where == cid and texts.count(text) != 1:
                problems.append(f"{cid}: accepted {text!r} stored {texts.count(text)} times")
        for text, where in cluster.maybe.items():
            if where == cid and texts.count(text) > 1:
                problems.append(f"{cid}: {text!r} stored {texts.count(text)} times")
        seqs = [r["seq"] for r in rows]
        for watcher in cluster.ended + [w for w, _ in cluster.watchers]:
            if watcher.cid == cid and watcher.seqs != sorted(set(watcher.seqs)):
                problems.append(f"{cid}: a surface saw {watcher.seqs}")
        for watcher, _ in cluster.watchers:
            if watcher.cid == cid and watcher.seqs != seqs:
                problems.append(f"{cid}: a live surface saw {watcher.seqs}, not {seqs}")
    return problems


@pytest.fixture(params=["notify", "redis"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    extra = {
        "OSTINATO_SERVER__FANOUT_CHANNEL": f"test_{uuid.uuid4().hex[:12]}",
        "OSTINATO_SERVER__LEASE_TTL_S": "2",
    }
    if request.param == "redis":
        url = os.environ.get("OSTINATO_TEST_REDIS_URL")
        if not url or importlib.util.find_spec("redis") is None:
            pytest.skip("needs OSTINATO_TEST_REDIS_URL and the redis package")
        extra["OSTINATO_SERVER__REDIS_URL"] = url
    with scratch_postgres() as url, AnsweringChat() as fake:
        env = {
            "OSTINATO_MODEL": "openai-chat:fake-model",
            "OPENAI_BASE_URL": f"{fake.url}/v1",
            "OPENAI_API_KEY": "k",
            **extra,
        }
        servers = [
            Server(url, tmp_path / f"data{i}", tmp_path / f"serve{i}.log", env) for i in range(3)
        ]
        try:
            for server in servers:
                server.start()
            yield Cluster(servers, random.Random(f"{SEED}-{request.param}"))
        finally:
            for server in servers:
                server.kill()


def test_three_servers_killed_at_random_lose_overlap_and_repeat_nothing(
    cluster: Cluster,
) -> None:
    kill_at = set(cluster.rng.sample(range(2, ROUNDS - 1), KILLS))
    dead: Server | None = None
    for n in range(ROUNDS):
        if dead is not None:
            dead.start()
            cluster.watch(dead)
            dead = None
        if n in kill_at:
            dead = cluster.kill()
        cluster.post(n)
        for watcher, _ in cluster.watchers:
            watcher.collect(reconnect=True)
    if dead is not None:
        dead.start()
        cluster.watch(dead)
    cluster.sort_posts()
    deadline = time.monotonic() + WAIT
    while not _settled(cluster):
        assert time.monotonic() < deadline, "what was accepted did not all run"
        time.sleep(0.2)
    seqs = {cid: [r["seq"] for r in _rows(cluster.alive()[0], cid)] for cid in cluster.cids}
    deadline = time.monotonic() + WAIT
    while True:  # every live surface has caught up with the last row (or never will)
        for watcher, _ in cluster.watchers:
            watcher.collect(reconnect=True)
        behind = [w for w, _ in cluster.watchers if w.seqs[-1:] != seqs[w.cid][-1:]]
        if not behind or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    problems = _check(cluster)
    assert not problems, "\n".join(problems)
    assert sum(s.kills for s in cluster.servers) >= KILLS
    assert cluster.accepted
