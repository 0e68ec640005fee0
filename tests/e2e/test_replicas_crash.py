"""The proof of issue 16: three ``ostinato serve`` processes on one PostgreSQL database,
every request sent to a server picked at random, servers killed with SIGKILL at random
points and started again, over NOTIFY and over Redis.

Each round sends one message to a random server (its SSE stream open there): a slow text
turn, a calculator call, or a ``shell`` command that needs approval. An approval is
decided on a server other than the one the message went to; streams of every
conversation are open on every server. A round may first kill a server: the one running
a shell command when there is one (the kill lands while the tool runs), else any. Checked
at the end, once everything accepted has run and every approval left is decided:

- no two turns of one conversation overlap (each begins after the one before ended);
- every message a server accepted is stored once (one whose server died before it
  answered: at most once), every tool_use has exactly one tool_result right after it,
  and no turn or tool call is left running in the database (``invariants``);
- no command ran twice: each writes its own mark to a file; one whose result says it ran
  wrote it once, one cut by a kill ("outcome unknown") at most once, one never started
  not at all;
- every surface (an ``/events`` stream on each server for each conversation,
  reconnected from its last seq when its stream ends while its server lives) saw each
  committed row at most once and in order, and one whose server lived to the end saw
  every row; every request the model got was a valid history.

Seeded (``OSTINATO_REPLICAS_SEED``); bounded: ``ROUNDS`` messages, ``KILLS`` kills.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import os
import random
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from tests.e2e.fake_model import AnsweringChat
from tests.e2e.invariants import (
    Row,
    query,
    result_text,
    results_for,
    running_in_db,
    stored_once,
    tool_pairs,
    tool_uses,
)
from tests.e2e.server import Server, SSEReader
from tests.e2e.test_fault_injection import scratch_postgres

SEED = int(os.environ.get("OSTINATO_REPLICAS_SEED", "16"))
ROUNDS = 16
KILLS = 4
CONVERSATIONS = 3
WAIT = 60.0
UNKNOWN = "outcome unknown"
NOT_RUN = "it was not run"
SHELL_S = 1.5  # how long each command runs (``sleep``), so a kill can land inside it
RUNNING_TOOL_PID = (
    "SELECT servers.pid FROM tool_calls JOIN turns ON turns.id = tool_calls.turn_id"
    " JOIN servers ON servers.id = turns.holder"
    " WHERE tool_calls.status = 'running' AND tool_calls.conversation_id = :c"
)


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


class Post:
    """One message sent: where, its text, its stream, and (a shell command) its mark."""

    def __init__(self, server: Server, cid: str, text: str, mark: str | None) -> None:
        self.server, self.cid, self.text, self.mark = server, cid, text, mark
        self.reader = server.stream("POST", f"/v1/conversations/{cid}/turns", {"text": text})
        self.asked: set[str] = set()  # approvals of its stream already decided


class Cluster:
    def __init__(self, servers: list[Server], rng: random.Random, marks: Path) -> None:
        self.servers, self.rng, self.marks = servers, rng, marks
        self.cids = [
            servers[0].post("/v1/conversations", {}).json()["id"] for _ in range(CONVERSATIONS)
        ]
        self.watchers: list[tuple[Watcher, Server]] = []
        self.ended: list[Watcher] = []  # watchers whose server was killed
        self.accepted: dict[str, str] = {}  # text -> conversation
        self.maybe: dict[str, str] = {}
        self.posts: list[Post] = []
        self.kills_in_tool = 0
        for server in servers:
            self.watch(server)

    def watch(self, server: Server) -> None:
        self.watchers += [(Watcher(server, cid), server) for cid in self.cids]

    def alive(self) -> list[Server]:
        return [s for s in self.servers if s.pid is not None]

    def other(self, *than: Server) -> Server:
        """A live server, one of ``than`` only when no other lives."""
        others = [s for s in self.alive() if s not in than]
        return self.rng.choice(others or self.alive())

    # --- a round ---------------------------------------------------------------------

    def post(self, n: int) -> Post:
        server, cid = self.rng.choice(self.alive()), self.rng.choice(self.cids)
        kind = self.rng.choice(["slow", "slow", "calculator", "shell", "shell"])
        mark = None
        if kind == "shell":
            mark = f"m{n}"
            command = f"echo {mark} >> {self.marks}; sleep {SHELL_S}"
            text = f"/tool shell {json.dumps({'command': command, 'timeout': 60})}"
        elif kind == "calculator":
            text = f'/tool calculator {{"expression": "{n}*7"}}'
        else:
            text = f"/slow {self.rng.randint(1, 10)} m{n}"
        post = Post(server, cid, text, mark)
        self.posts.append(post)
        deadline = time.monotonic() + WAIT
        while not post.reader.frames and post.reader.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)  # until it is accepted (its first frame) or refused
        return post

    def approve_asked(self, post: Post | None, wait: float) -> None:
        """Decide what the streams show asked, each on a server other than the one its
        message went to (waiting up to ``wait`` for ``post``'s own approval)."""
        deadline = time.monotonic() + wait
        while post is not None and post.mark is not None and post.reader.is_alive():
            if self._asked(post) or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        for each in self.posts:
            for approval_id in self._asked(each) - each.asked:
                each.asked.add(approval_id)
                self.decide(each.cid, approval_id, self.other(each.server))

    def _asked(self, post: Post) -> set[str]:
        frames = list(post.reader.frames)
        return {f.data["approval_id"] for f in frames if f.event == "approval.requested"}

    def decide(self, cid: str, approval_id: str, server: Server) -> None:
        with contextlib.suppress(httpx.HTTPError):  # its server may have just been killed
            server.post(f"/v1/conversations/{cid}/approvals/{approval_id}", {"decision": "approve"})

    def kill(self) -> Server:
        """Kill the server running a tool if one is, else any."""
        running = {pid for cid in self.cids for (pid,) in query(self.url, RUNNING_TOOL_PID, cid)}
        in_tool = [s for s in self.alive() if s.pid in running]
        victim = self.rng.choice(in_tool or self.alive())
        self.kills_in_tool += bool(in_tool)
        victim.kill()
        for watcher, server in list(self.watchers):
            if server is victim:
                watcher.collect(reconnect=False)
                self.ended.append(watcher)
                self.watchers.remove((watcher, server))
        return victim

    @property
    def url(self) -> str:
        return self.servers[0].database_url

    # --- the end -------------------------------------------------------------------

    def sort_posts(self) -> None:
        for post in self.posts:
            first = post.reader.frames[0].event if post.reader.frames else None
            if first in ("turn.started", "input.queued"):
                self.accepted[post.text] = post.cid
            elif post.reader.status in (None, 200):
                self.maybe[post.text] = post.cid  # its server died before it answered

    def settle(self) -> None:
        """Until everything accepted has run: approvals still pending (one whose turn's
        server died waits, its turn paused) are decided, on a random server."""
        deadline = time.monotonic() + WAIT
        while not self._settled():
            assert time.monotonic() < deadline, "what was accepted did not all run"
            time.sleep(0.2)

    def _settled(self) -> bool:
        server = self.rng.choice(self.alive())
        for cid in self.cids:
            pending = server.get(f"/v1/conversations/{cid}/approvals?pending=true").json()
            for approval in pending["approvals"]:
                self.decide(cid, approval["id"], self.rng.choice(self.alive()))
            turns = server.get(f"/v1/conversations/{cid}/turns").json()["turns"]
            queued = server.get(f"/v1/conversations/{cid}/queue").json()["queued"]
            if pending["approvals"] or queued or any(t["status"] != "finished" for t in turns):
                return False
            users = [r for r in _rows(server, cid) if r["role"] == "user"]
            if len(users) < sum(c == cid for c in self.accepted.values()):
                return False
        return True


def _rows(server: Server, cid: str) -> list[Row]:
    url = f"/v1/conversations/{cid}/messages?include_hidden=true&limit=1000"
    rows: list[Row] = server.get(url).json()["messages"]
    return rows


def _overlaps(server: Server, cid: str) -> list[str]:
    turns = server.get(f"/v1/conversations/{cid}/turns").json()["turns"]
    spans = sorted((t["started_at"], t["finished_at"], t["id"]) for t in turns)
    return [
        f"turn {after} began before {before} ended"
        for (_, ended, before), (began, _, after) in itertools.pairwise(spans)
        if datetime.fromisoformat(began) < datetime.fromisoformat(ended)
    ]


def _ran_once(rows: list[Row], marks: list[str]) -> list[str]:
    """Each command's mark as often as its result says it ran: once if it ran, at most
    once if a kill cut it (outcome unknown), never if it never started."""
    problems = []
    for row in rows:
        for use in tool_uses(row):
            if use["name"] != "shell":
                continue
            mark = use["input"]["command"].split()[1]
            found = results_for(rows, use["id"])
            if len(found) != 1:
                continue  # tool_pairs says so
            result, count = found[0], marks.count(mark)
            text = result_text(result)
            if text.startswith(UNKNOWN) or result["is_error"]:
                allowed = (0,) if NOT_RUN in text else (0, 1)
            else:
                allowed = (1,)
            if count not in allowed:
                problems.append(f"command {mark} ran {count} times; its result: {text[:80]!r}")
    return problems


def _check(cluster: Cluster, fake: AnsweringChat) -> list[str]:
    server = cluster.alive()[0]
    marks = cluster.marks.read_text().split() if cluster.marks.exists() else []
    problems: list[str] = [f"the model got invalid requests: {v}" for v in fake.violations]
    for cid in cluster.cids:
        rows = _rows(server, cid)
        accepted = [t for t, c in cluster.accepted.items() if c == cid]
        maybe = [t for t, c in cluster.maybe.items() if c == cid]
        found = _overlaps(server, cid) + stored_once(rows, accepted, maybe) + tool_pairs(rows)
        found += running_in_db(cluster.url, cid) + _ran_once(rows, marks)
        seqs = [r["seq"] for r in rows]
        for watcher in cluster.ended + [w for w, _ in cluster.watchers]:
            if watcher.cid == cid and watcher.seqs != sorted(set(watcher.seqs)):
                found.append(f"a surface saw {watcher.seqs}")
        for watcher, _ in cluster.watchers:
            if watcher.cid == cid and watcher.seqs != seqs:
                found.append(f"a live surface saw {watcher.seqs}, not {seqs}")
        problems += [f"{cid}: {problem}" for problem in found]
    return problems


@pytest.fixture(params=["notify", "redis"])
def cluster(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Cluster, AnsweringChat]]:
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
        pooled = f"{url}?pool_size=4&max_overflow=6"  # three servers within max_connections
        servers = [
            Server(pooled, tmp_path / f"data{i}", tmp_path / f"serve{i}.log", env) for i in range(3)
        ]
        try:
            for server in servers:
                server.start()
            rng = random.Random(f"{SEED}-{request.param}")
            yield Cluster(servers, rng, tmp_path / "marks.txt"), fake
        finally:
            for server in servers:
                server.kill()


def test_three_servers_killed_at_random_lose_overlap_and_repeat_nothing(
    cluster: tuple[Cluster, AnsweringChat],
) -> None:
    lab, fake = cluster
    began = time.monotonic()
    kill_at = set(lab.rng.sample(range(2, ROUNDS - 1), KILLS))
    dead: Server | None = None
    for n in range(ROUNDS):
        if dead is not None:
            dead.start()
            lab.watch(dead)
            dead = None
        if n in kill_at:
            dead = lab.kill()
        post = lab.post(n)
        lab.approve_asked(post, wait=3.0)
        for watcher, _ in lab.watchers:
            watcher.collect(reconnect=True)
    if dead is not None:
        dead.start()
        lab.watch(dead)
    lab.sort_posts()
    lab.settle()
    server = lab.alive()[0]
    seqs = {cid: [r["seq"] for r in _rows(server, cid)] for cid in lab.cids}
    deadline = time.monotonic() + WAIT
    while True:  # every live surface has caught up with the last row (or never will)
        for watcher, _ in lab.watchers:
            watcher.collect(reconnect=True)
        behind = [w for w, _ in lab.watchers if w.seqs[-1:] != seqs[w.cid][-1:]]
        if not behind or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    problems = _check(lab, fake)
    assert not problems, "\n".join(problems)
    assert sum(s.kills for s in lab.servers) >= KILLS
    assert lab.accepted
    rows = [r for cid in lab.cids for r in _rows(server, cid)]
    shells = [u["id"] for r in rows for u in tool_uses(r) if u["name"] == "shell"]
    cut = [i for i in shells if result_text(results_for(rows, i)[0]).startswith(UNKNOWN)]
    print(
        f"\n{len(lab.posts)} messages, {len(shells)} shell calls ({len(cut)} cut by a kill:"
        f" outcome unknown), {KILLS} kills ({lab.kills_in_tool} while a tool ran),"
        f" {time.monotonic() - began:.0f} s"
    )
