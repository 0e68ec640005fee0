"""Fault injection, the races (issue 24): one call, one result, whatever races it.

The second half of the fault-injection run (``test_fault_injection.py`` kills one
server at many points). Here real ``ostinato serve`` processes (SQLite, and PostgreSQL
when ``OSTINATO_TEST_POSTGRES_URL`` is set) meet the three shapes that once wrote two
results for one tool call, or none:

- **cancels at random moments** (``test_cancels_at_random_moments``): a calculator turn
  (a hidden recall call first, then the model's call) is cancelled at a seeded point:
  a seeded 0-30 ms after the post, or as a seeded frame of its stream arrives (before
  the first model call, during the recall or the calculator, between a result and the
  next model call, while the answer streams). Before the fix a cancel that came while a
  result's write was in flight gave that call a second result ("interrupted"), and one
  that came while the model's reply was written left its call with none.
- **two servers on one database** (``test_two_servers_on_one_database``): two separate
  ``ostinato serve`` processes, each sent messages for one conversation at once. Before
  the fix, on SQLite, their turns ran at the same time and answered each other's calls.
- **a worker killed during tool calls** (``test_a_worker_killed_during_tool_calls``):
  ``serve --workers 2``, approved ``sleep`` commands running in several conversations
  with long histories, the worker running most of them SIGKILLed and a message sent to
  each conversation at once. The other worker recovers the dead one's turns ("outcome
  unknown"); before the fix the new turn of a conversation could begin between
  recovery's claim of the old turn and its close (reading the history of a long
  conversation takes a while), and answer the same call "interrupted: no result".

Every conversation is then checked (``invariants``): every tool_use has exactly one
tool_result right after it (zero or two fail), no turn or tool call is left running, no
two turns of a conversation overlap, and every request the model got was a valid
history (the fake model checks it). Seeded (``OSTINATO_FAULT_SEED``) and bounded by
counts; ``OSTINATO_FAULT_SCALE=N`` runs N times as many points by hand. Each test prints
how many points it ran and how many failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psutil
import pytest
import sqlalchemy as sa

from tests.e2e.fake_model import AnsweringChat
from tests.e2e.invariants import Row, overlapping_turns, query, running_in_db, tool_pairs
from tests.e2e.server import ForkServer, Server, SSEReader
from tests.e2e.test_fault_injection import FORK, SEED, database
from tests.e2e.test_workers import Workers

SCALE = int(os.environ.get("OSTINATO_FAULT_SCALE", "1"))
CANCELS = 40 * SCALE  # cancel points per engine
ROUNDS = 8 * SCALE  # rounds of messages to two servers at once
KILLS = 1 * SCALE  # workers killed during tool calls
CONVERSATIONS = 4  # per kill, each with a command running
HISTORY = 4_000  # rows of each such conversation's history (recovery reads them all)
STALL_S = 2.0  # how long the database's writes stall (``Stall``)
RUNNING = "SELECT id, holder FROM turns WHERE conversation_id = :c AND status = 'running'"
WAIT = 60.0
CALCULATOR = '/tool calculator {"expression": "2*(3+4)"}'
SLEEP = '/tool shell {"command": "sleep 30"}'


@dataclass
class Tally:
    """What a run did, for its report: points run, cancels that won, stalls made
    (``Stall``), problems found."""

    name: str
    points: int = 0
    won: int = 0
    stalls: int = 0
    problems: dict[str, list[str]] = field(default_factory=dict)

    def check(self, cid: str, found: list[str]) -> None:
        if found:
            self.problems[cid] = found

    def report(self) -> None:
        line = f"{self.name}: {self.points} points, {self.won} cancels won, "
        line += f"{self.stalls} stalls, {len(self.problems)} broken"
        print(f"\n{line}")
        found = "".join(f"\n{c}: {p}" for c, p in self.problems.items())
        assert not self.problems, line + found


def _fake_env(fake: AnsweringChat) -> dict[str, str]:
    return {
        "OSTINATO_MODEL": "openai-chat:fake-model",
        "OPENAI_BASE_URL": f"{fake.url}/v1",
        "OPENAI_API_KEY": "k",
    }


# One client for every request of a test: making one costs milliseconds (tens of them on
# a loaded machine), which would be most of a cancel point's time.
HTTP = httpx.Client(timeout=WAIT)


def _post(url: str, path: str, body: object = None) -> httpx.Response:
    return HTTP.post(f"{url}{path}", json=body)


def _get(url: str, path: str) -> httpx.Response:
    return HTTP.get(f"{url}{path}")


def _rows(url: str, cid: str) -> list[Row]:
    """Every row of the conversation, page by page."""
    rows: list[Row] = []
    while True:
        after = rows[-1]["seq"] if rows else 0
        path = f"/v1/conversations/{cid}/messages?include_hidden=true&limit=500&after_seq={after}"
        got = _get(url, path)
        assert got.status_code == 200, got.text
        page: list[Row] = got.json()["messages"]
        if not page:
            return rows
        rows += page


def _quiet(url: str, cid: str) -> None:
    """Until nothing of the conversation is queued or running."""
    deadline = time.monotonic() + WAIT
    while True:
        queued = _get(url, f"/v1/conversations/{cid}/queue").json()["queued"]
        state = _get(url, f"/v1/conversations/{cid}").json()["state"]
        if not queued and state != "running":
            return
        assert time.monotonic() < deadline, f"{cid} still busy after {WAIT} s"
        time.sleep(0.02)


def _checked(url: str, database_url: str, cid: str, fake: AnsweringChat | None) -> list[str]:
    """Every invariant of one conversation, once it is quiet."""
    _quiet(url, cid)
    found = tool_pairs(_rows(url, cid))
    found += running_in_db(database_url, cid)
    found += overlapping_turns(database_url, cid)
    if fake is not None and fake.violations:
        found += [f"the model got an invalid request: {v}" for v in fake.violations]
        fake.violations.clear()
    return found


@contextlib.contextmanager
def _servers(url: str, tmp_path: Path, fake: AnsweringChat, count: int) -> Iterator[list[Server]]:
    forks = ForkServer() if FORK else None
    servers = [
        Server(url, tmp_path / "data", tmp_path / f"serve{i}.log", _fake_env(fake), forks=forks)
        for i in range(count)
    ]
    try:
        for server in servers:
            server.start()
        yield servers
    finally:
        for server in servers:
            server.kill()
        if forks is not None:
            forks.close()


# --- cancels at random moments -------------------------------------------------------------


def _cancel_once(server: Server, rng: random.Random, tally: Tally) -> str:
    """One calculator turn, cancelled at a seeded moment; its conversation's id."""
    cid = _post(server.url, "/v1/conversations").json()["id"]
    turns = f"{server.url}/v1/conversations/{cid}/turns"
    reader = SSEReader("POST", turns, {"text": CALCULATOR}, client=HTTP)
    if rng.random() < 0.4:
        time.sleep(rng.uniform(0, 0.03))
    else:  # as the k-th frame arrives: turn.started, the recall, its row, the call, ...
        with contextlib.suppress(EOFError):
            for _ in range(rng.randint(1, 9)):
                if reader.next_frame(WAIT).event == "turn.finished":
                    break
    cancelled = _post(server.url, f"/v1/conversations/{cid}/cancel")
    assert cancelled.status_code in (200, 409), cancelled.text
    with contextlib.suppress(EOFError):
        reader.until_type("turn.finished", WAIT)
    reader.finish()
    ended = [e.data["stop_reason"] for e in reader.frames if e.event == "turn.finished"]
    tally.points += 1
    tally.won += ended == ["cancelled"]
    return cid


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_cancels_at_random_moments(engine: str, tmp_path: Path) -> None:
    tally = Tally(f"{engine}: cancels at random moments")
    rng = random.Random(f"{SEED}-cancel-{engine}")
    with (
        database(engine, tmp_path) as url,
        AnsweringChat() as fake,
        _servers(url, tmp_path, fake, 1) as (server,),
    ):
        for _ in range(CANCELS):
            cid = _cancel_once(server, rng, tally)
            tally.check(cid, _checked(server.url, url, cid, fake))
    tally.report()


# --- two servers on one database -----------------------------------------------------------


def _at_once(sends: list[tuple[Server, str, str]]) -> list[int]:
    """Post every (server, conversation, text) at the same moment; their statuses."""
    statuses: list[int] = []
    barrier = threading.Barrier(len(sends))

    def send(server: Server, cid: str, text: str) -> None:
        barrier.wait()
        answer = _post(server.url, f"/v1/conversations/{cid}/turns", {"text": text})
        statuses.append(answer.status_code)

    threads = [threading.Thread(target=send, args=s) for s in sends]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_two_servers_on_one_database(engine: str, tmp_path: Path) -> None:
    tally = Tally(f"{engine}: two servers on one database")
    rng = random.Random(f"{SEED}-two-{engine}")
    with (
        database(engine, tmp_path) as url,
        AnsweringChat() as fake,
        _servers(url, tmp_path, fake, 2) as (one, two),
    ):
        for _ in range(ROUNDS):
            cid = _post(one.url, "/v1/conversations").json()["id"]
            texts = [CALCULATOR, '/tool calculator {"expression": "6*7"}', "/slow 5 a", "hi"]
            rng.shuffle(texts)
            sends = [(one if i % 2 else two, cid, text) for i, text in enumerate(texts)]
            assert _at_once(sends) == [200] * len(sends)
            tally.points += 1
            for server in (one, two):
                _quiet(server.url, cid)
            tally.check(cid, _checked(one.url, url, cid, fake))
    tally.report()


# --- a worker killed during tool calls -------------------------------------------------------


def _long_history(database_url: str, cids: list[str]) -> None:
    """``HISTORY`` rows of plain talk in each (new, empty) conversation, written
    straight into the database (as if the conversation had gone on for months)."""
    now = datetime.now(UTC)
    rows = [
        (
            uuid.uuid4().hex,
            cid,
            seq,
            "user" if seq % 2 else "assistant",
            json.dumps([{"type": "text", "text": f"row {seq}"}]),
        )
        for cid in cids
        for seq in range(1, HISTORY + 1)
    ]
    url = sa.make_url(database_url)
    columns = "id, conversation_id, seq, role, blocks, hidden, metadata, created_at"
    if url.get_backend_name() == "sqlite":
        assert url.database
        stamp = now.strftime("%Y-%m-%d %H:%M:%S.%f")
        with sqlite3.connect(url.database, timeout=30) as db:
            db.executemany(
                f"INSERT INTO messages ({columns}) VALUES (?, ?, ?, ?, ?, 0, '{{}}', ?)",
                [(*row, stamp) for row in rows],
            )
        return

    async def copy() -> None:
        import asyncpg

        conn = await asyncpg.connect(
            user=url.username,
            password=url.password,
            host=url.host,
            port=url.port,
            database=url.database,
        )
        try:
            await conn.copy_records_to_table(
                "messages",
                records=[(*row, False, "{}", now) for row in rows],
                columns=columns.split(", "),
            )
        finally:
            await conn.close()

    asyncio.run(copy())


class Stall(threading.Thread):
    """Stalls the database's writes for ``STALL_S`` the moment one of ``held``'s turns
    (turn id -> its holder at the kill) is seen taken over while still running: recovery
    claimed it and has not closed it yet, as on a slow disk or a busy database. SQLite:
    its write lock; PostgreSQL: a lock that holds back writes of tool-call records (the
    close of a turn writes them). Before the fix a claim and its close were two writes,
    and a new turn could begin between them; since, they are one, and this moment never
    comes (``stalled`` stays False)."""

    def __init__(self, database_url: str, held: dict[str, str | None]) -> None:
        super().__init__(daemon=True)
        self.url, self.held = sa.make_url(database_url), held
        self.stalled = False
        self.start()

    def _moved(self, running: list[tuple[str, str | None]]) -> bool:
        return any(holder != self.held[turn] for turn, holder in running)

    def run(self) -> None:
        if self.url.get_backend_name() == "sqlite":
            self._sqlite()
        else:
            asyncio.run(self._postgres())

    def _sqlite(self) -> None:
        assert self.url.database
        marks = ", ".join("?" * len(self.held))
        sql = f"SELECT id, holder FROM turns WHERE status = 'running' AND id IN ({marks})"
        db = sqlite3.connect(self.url.database, timeout=30, isolation_level=None)
        try:
            deadline = time.monotonic() + WAIT / 2
            while time.monotonic() < deadline:
                running = db.execute(sql, list(self.held)).fetchall()
                if self._moved(running):
                    db.execute("BEGIN IMMEDIATE")
                    self.stalled = True
                    time.sleep(STALL_S)
                    db.execute("ROLLBACK")
                    return
                if not running:
                    return
                time.sleep(0.002)
        finally:
            db.close()

    async def _postgres(self) -> None:
        import asyncpg

        url = self.url
        conn = await asyncpg.connect(
            user=url.username,
            password=url.password,
            host=url.host,
            port=url.port,
            database=url.database,
        )
        sql = "SELECT id, holder FROM turns WHERE status = 'running' AND id = ANY($1::text[])"
        try:
            deadline = time.monotonic() + WAIT / 2
            while time.monotonic() < deadline:
                running = [(r[0], r[1]) for r in await conn.fetch(sql, list(self.held))]
                if self._moved(running):
                    async with conn.transaction():
                        await conn.execute("LOCK TABLE tool_calls IN EXCLUSIVE MODE")
                        self.stalled = True
                        await asyncio.sleep(STALL_S)
                    return
                if not running:
                    return
                await asyncio.sleep(0.002)
        finally:
            await conn.close()


def _sleeps(workers: Workers) -> dict[psutil.Process, int]:
    return {
        worker: sum(1 for c in worker.children(recursive=True) if c.name() == "sleep")
        for worker in workers.workers()
    }


def _kill_the_busiest(workers: Workers) -> int:
    """SIGKILL the worker running the most commands (and its commands); how many."""
    counts = _sleeps(workers)
    victim = max(counts, key=lambda worker: counts[worker])
    age = time.time() - victim.create_time()
    if age < 11:  # the supervisor gives up on a worker that dies young five times
        time.sleep(11 - age)
    children = victim.children(recursive=True)
    victim.kill()
    victim.wait(timeout=WAIT)
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    return counts[victim]


def _kill_round(workers: Workers, database_url: str, tally: Tally) -> None:
    url = workers.url
    cids = [_post(url, "/v1/conversations").json()["id"] for _ in range(CONVERSATIONS)]
    _long_history(database_url, cids)
    readers = []
    for cid in cids:
        turns = f"{url}/v1/conversations/{cid}/turns"
        reader = SSEReader("POST", turns, {"text": SLEEP}, client=HTTP)
        asked = reader.until_type("approval.requested", WAIT)
        path = f"/v1/conversations/{cid}/approvals/{asked.data['approval_id']}"
        assert _post(url, path, {"decision": "approve"}).status_code == 200
        readers.append(reader)
    deadline = time.monotonic() + WAIT
    while sum(_sleeps(workers).values()) < len(cids):
        assert time.monotonic() < deadline, workers.tail()
        time.sleep(0.05)
    held: dict[str, str | None] = {}
    for cid in cids:
        held.update(query(database_url, RUNNING, cid))
    stall = Stall(database_url, held)
    tally.points += _kill_the_busiest(workers)
    threads = [
        threading.Thread(
            target=_post, args=(url, f"/v1/conversations/{cid}/turns", {"text": "after the kill"})
        )
        for cid in cids
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for cid in cids:
        tally.check(cid, _checked(url, database_url, cid, None))
    stall.join()
    tally.stalls += stall.stalled
    for reader in readers:
        reader.finish(1)


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_worker_killed_during_tool_calls(engine: str, tmp_path: Path) -> None:
    tally = Tally(f"{engine}: --workers 2, a worker killed during tool calls")
    with database(engine, tmp_path) as url:
        workers = Workers(url, tmp_path / "data")
        try:
            workers.servers(2)
            for _ in range(KILLS):
                _kill_round(workers, url, tally)
        finally:
            workers.stop()
    tally.report()
