"""``ostinato serve --workers N`` as a user runs it (``cli.workers``): one port, one
database, N processes sharing turns, frames and control; a worker that dies is started
again; SIGTERM stops them all gracefully; a supervisor killed outright leaves no worker.

On SQLite the workers' frames go through the supervisor's hub (``fanout_local``), on
PostgreSQL (when ``OSTINATO_TEST_POSTGRES_URL`` is set) through ``LISTEN/NOTIFY``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.e2e.server import SSEReader, free_port, server_env
from tests.e2e.test_fault_injection import database
from tests.patience import start_timeout

WAIT = 60.0
MEMORY = ("--database-url", "memory://", "--workers", "2")
SHELL = '/tool shell {"command": "echo ran >> marks.txt"}'


class Workers:
    """A supervisor with its workers, started as the README's command is."""

    def __init__(
        self, database_url: str, data: Path, count: int = 2, env: dict[str, str] | None = None
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data = data
        self.log = data.parent / "workers.log"
        argv = ["serve", "--port", str(self.port), "--database-url", database_url]
        argv += ["--data-dir", str(data), "--workers", str(count)]
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "ostinato", *argv],
                env=server_env({"OSTINATO_SERVER__LEASE_TTL_S": "2", **(env or {})}),
                cwd=data.parent,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )

    def servers(self, want: int, besides: frozenset[str] = frozenset()) -> set[str]:
        """The lease ids of the workers answering, once ``want`` of them (not counting
        ``besides``) have answered."""
        seen: set[str] = set()
        deadline = time.monotonic() + max(WAIT, start_timeout())  # N workers start at once
        while len(seen - besides) < want:
            assert self.process.poll() is None, f"the supervisor exited:\n{self.tail()}"
            assert time.monotonic() < deadline, f"saw only {seen}:\n{self.tail()}"
            with contextlib.suppress(httpx.HTTPError):
                # a new connection each time: the kernel hands it to either worker
                got = httpx.get(f"{self.url}/healthz", timeout=5)
                if got.status_code == 200:
                    seen.add(got.json()["load"]["server"])
            time.sleep(0.02)
        return seen

    def workers(self) -> list[psutil.Process]:
        return psutil.Process(self.process.pid).children()

    def post(self, path: str, body: object = None) -> httpx.Response:
        return httpx.post(f"{self.url}{path}", json=body, timeout=WAIT)

    def get(self, path: str) -> httpx.Response:
        return httpx.get(f"{self.url}{path}", timeout=WAIT)

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-60:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture(params=["sqlite", "postgres"])
def workers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Workers]:
    with database(request.param, tmp_path) as url:
        running = Workers(url, tmp_path / "data")
        try:
            yield running
        finally:
            left = [p for p in _tree(running.process.pid)]
            running.stop()
            psutil.wait_procs(left, timeout=10)
            for process in left:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.kill()


def _tree(pid: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.NoSuchProcess):
        return psutil.Process(pid).children(recursive=True)
    return []


def test_two_workers_share_one_conversation_and_stop_together(workers: Workers) -> None:
    assert len(workers.servers(2)) == 2
    cid = workers.post("/v1/conversations").json()["id"]
    watch = SSEReader("GET", f"{workers.url}/v1/conversations/{cid}/events")
    for i in range(6):  # each on a new connection: some land on each worker
        answer = workers.post(f"/v1/conversations/{cid}/turns", {"text": f"hello {i}"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["stop_reason"] == "end_turn"
    # an approval asked by one worker, decided through whichever worker gets the POST
    shell = SSEReader("POST", f"{workers.url}/v1/conversations/{cid}/turns", {"text": SHELL})
    asked = shell.until(lambda e: e.event == "approval.requested", WAIT)
    approval = asked.data["approval_id"]
    decided = workers.post(f"/v1/conversations/{cid}/approvals/{approval}", {"decision": "approve"})
    assert decided.status_code == 200, decided.text
    shell.until(lambda e: e.event == "turn.finished", WAIT)
    again = workers.post(f"/v1/conversations/{cid}/approvals/{approval}", {"decision": "approve"})
    assert again.status_code == 409
    assert (workers.data / "workdirs" / cid / "marks.txt").read_text() == "ran\n"

    rows = workers.get(f"/v1/conversations/{cid}/messages?include_hidden=true&limit=500")
    stored = [m["seq"] for m in rows.json()["messages"]]
    deadline = time.monotonic() + WAIT
    while True:  # the watcher saw every stored row once, in order, whichever worker wrote it
        seen = [e.data["seq"] for e in watch.frames if e.event == "message"]
        if seen == stored or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert seen == stored

    code = _terminate(workers)
    assert code == 0, workers.tail()
    assert _tree(workers.process.pid) == []
    watch.finish()  # the stream ended with the workers


def test_a_dead_worker_is_started_again_and_its_turn_recovered(workers: Workers) -> None:
    """The worker running an approved ``sleep 30`` is SIGKILLed: the supervisor starts a
    new one, and once the dead one's lease expires (2 s here) its turn is closed with the
    call's outcome unknown; the command is never run again."""
    first = workers.servers(2)
    cid = workers.post("/v1/conversations").json()["id"]
    body = {"text": '/tool shell {"command": "echo ran >> marks.txt; sleep 30"}'}
    shell = SSEReader("POST", f"{workers.url}/v1/conversations/{cid}/turns", body)
    asked = shell.until(lambda e: e.event == "approval.requested", WAIT)
    path = f"/v1/conversations/{cid}/approvals/{asked.data['approval_id']}"
    assert workers.post(path, {"decision": "approve"}).status_code == 200
    victim = _running("sleep", workers)
    victim.kill()
    victim.wait(timeout=WAIT)
    workers.servers(1, besides=frozenset(first))  # the new worker's lease answers
    deadline = time.monotonic() + WAIT
    while workers.get(f"/v1/conversations/{cid}").json()["state"] == "running":
        assert time.monotonic() < deadline, workers.tail()
        time.sleep(0.1)
    rows = workers.get(f"/v1/conversations/{cid}/messages?include_hidden=true").json()
    results = [b for m in rows["messages"] for b in m["blocks"] if b["type"] == "tool_result"]
    assert any("outcome unknown" in str(r["content"]) for r in results), results
    answer = workers.post(f"/v1/conversations/{cid}/turns", {"text": "after the crash"})
    assert answer.status_code == 200 and answer.json()["stop_reason"] == "end_turn"
    assert (workers.data / "workdirs" / cid / "marks.txt").read_text() == "ran\n"
    assert len(workers.workers()) == 2
    shell.finish()


def _running(name: str, workers: Workers) -> psutil.Process:
    """The worker whose process tree runs a command called ``name``."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        for worker in workers.workers():
            if any(p.name() == name for p in worker.children(recursive=True)):
                return worker
        time.sleep(0.05)
    raise AssertionError(f"no worker runs {name}:\n{workers.tail()}")


def test_a_supervisor_killed_outright_leaves_no_worker(workers: Workers) -> None:
    workers.servers(2)
    children = workers.workers()
    assert len(children) == 2
    os.kill(workers.process.pid, signal.SIGKILL)
    workers.process.wait(timeout=WAIT)
    _, alive = psutil.wait_procs(children, timeout=WAIT)  # each saw its supervisor go
    assert alive == [], [p.pid for p in alive]


def _terminate(workers: Workers) -> int:
    workers.process.send_signal(signal.SIGTERM)
    return workers.process.wait(timeout=WAIT)


def test_workers_refuse_a_store_they_cannot_share(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ostinato", "serve", "--port", str(free_port()), *MEMORY],
        env=server_env({}),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert done.returncode == 2
    assert "--workers needs a database the processes share" in done.stderr


def test_workers_stop_quietly_their_pollers_before_their_store(tmp_path: Path) -> None:
    """SIGTERM: each worker's schedule and job pollers stop before its store closes, so
    none ticks against a closed store (with ticks this often, one would)."""
    often = {"OSTINATO_BACKGROUND__POLL_SECONDS": "0.01"}
    often["OSTINATO_BACKGROUND__JOBS__POLL_SECONDS"] = "0.01"
    running = Workers(f"sqlite:///{tmp_path / 'quiet.db'}", tmp_path / "data", env=often)
    try:
        assert len(running.servers(2)) == 2
        time.sleep(0.5)  # the pollers tick meanwhile
        assert _terminate(running) == 0, running.tail()
    finally:
        running.stop()
    log = running.log.read_text(errors="replace")
    assert "a tick failed" not in log and "Traceback" not in log, log[-3000:]
    assert "ERROR" not in log, log[-3000:]


GRACE_S = 2.0
MARGIN_S = 20.0  # the machine's slowness: generous, and still under the 25-45 s once seen


def test_workers_stop_by_themselves_within_their_grace(tmp_path: Path) -> None:
    """SIGTERM while a turn runs a long command: the turn gets the grace (2 s here), is
    cancelled, and every worker exits by itself, so the supervisor exits well before it
    would kill one (the grace and STOP_SLACK_S). How long it took is the supervisor's
    own report in its log (``stopped N s after the signal``); the test holds the exit to
    a deadline of the grace, a second and a margin for a loaded machine, not to a time."""
    env = {"OSTINATO_SERVER__SHUTDOWN_GRACE_S": str(GRACE_S)}
    running = Workers(f"sqlite:///{tmp_path / 'grace.db'}", tmp_path / "data", env=env)
    try:
        running.servers(2)
        cid = running.post("/v1/conversations").json()["id"]
        body = {"text": '/tool shell {"command": "sleep 120"}'}
        shell = SSEReader("POST", f"{running.url}/v1/conversations/{cid}/turns", body)
        asked = shell.until(lambda e: e.event == "approval.requested", WAIT)
        path = f"/v1/conversations/{cid}/approvals/{asked.data['approval_id']}"
        assert running.post(path, {"decision": "approve"}).status_code == 200
        _running("sleep", running)
        running.process.send_signal(signal.SIGTERM)
        code = running.process.wait(timeout=GRACE_S + 1 + MARGIN_S)
        assert code == 0, running.tail()
        finished = shell.until(lambda e: e.event == "turn.finished", WAIT)
        assert finished.data["stop_reason"] == "cancelled"
    finally:
        running.stop()
    log = running.log.read_text(errors="replace")
    assert "did not stop within" not in log, log[-3000:]
    stopped = [
        line for line in log.splitlines() if "stopped" in line and "after the signal" in line
    ]
    assert len(stopped) == 1 and f"(grace {GRACE_S:g} s" in stopped[0], log[-3000:]
    print(stopped[0])
