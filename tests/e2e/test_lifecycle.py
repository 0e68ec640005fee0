"""A server's life beside others and its end (issue 9 items 2 and 3, issue 10 item 11).

Black-box, against real ``ostinato serve`` processes on SQLite and PostgreSQL, with the
offline model (``/tool shell {...}`` makes it call the shell):

- a second server on the same database, one that cannot bind its port and one that
  serves, leaves the first one's running tool call alone: the call ends with exactly one
  result (its real one), the conversation idle;
- SIGTERM while an approved ``sleep 30`` runs: after the grace the turn ends
  ``cancelled``, every call answered, the conversation idle, no process left behind;
  a turn that ends within the grace is let finish, and meanwhile new turns get a 503;
- twenty messages sent at once behind a running turn run in the order of the
  ``queued_position`` each was told.

A shell command that must outlive a moment waits for a file the test creates
(``go``), and says it runs by creating one (``started``): the test waits on files and
frames, never on time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.e2e.invariants import (
    Row,
    result_text,
    results_for,
    running_in_db,
    tool_pairs,
    turn_endings,
)
from tests.e2e.server import Server, SSEReader
from tests.e2e.test_fault_injection import database

WAIT = 60.0
BLOCKED = "touch started; while [ ! -e go ]; do sleep 0.05; done; echo finished"


def wait_for(check: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.05)


def shell(command: str) -> str:
    return "/tool shell " + json.dumps({"command": command, "timeout": 600})


@contextmanager
def running(server: Server) -> Iterator[Server]:
    """The server started, and stopped (SIGTERM) at the end whatever happens."""
    server.start()
    try:
        yield server
    finally:
        if server.alive():
            server.terminate()


def conversation(server: Server) -> str:
    created = server.post("/v1/conversations", {})
    assert created.status_code == 201, created.text
    cid: str = created.json()["id"]
    return cid


def rows(server: Server, cid: str) -> list[Row]:
    got = server.get(f"/v1/conversations/{cid}/messages?include_hidden=true")
    assert got.status_code == 200, got.text
    found: list[Row] = got.json()["messages"]
    return found


def state(server: Server, cid: str) -> str:
    found: str = server.get(f"/v1/conversations/{cid}").json()["state"]
    return found


def approved_shell(server: Server, cid: str, command: str) -> tuple[SSEReader, Path]:
    """A streamed turn whose approved shell command has started; the command's workdir."""
    stream = server.stream("POST", f"/v1/conversations/{cid}/turns", {"text": shell(command)})
    asked = stream.until_type("approval.requested", WAIT).data
    path = f"/v1/conversations/{cid}/approvals/{asked['approval_id']}"
    decided = server.post(path, {"decision": "approve"})
    assert decided.status_code == 200, decided.text
    workdir = server.data_dir / "workdirs" / cid
    wait_for((workdir / "started").exists, "the shell command started")
    return stream, workdir


def shell_call(found: list[Row]) -> str:
    (use,) = [
        b
        for r in found
        if r["role"] == "assistant"
        for b in r["blocks"]
        if b["type"] == "tool_use" and b["name"] == "shell"
    ]
    tool_use_id: str = use["id"]
    return tool_use_id


def serve_on_taken_port(server: Server, port: int, log: Path) -> tuple[int, str]:
    """Run ``ostinato serve`` on a port that is taken; its exit code and output."""
    argv = [sys.executable, "-m", "ostinato", "serve", "--port", str(port)]
    argv += ["--database-url", server.database_url, "--data-dir", str(server.data_dir)]
    with log.open("wb") as sink:
        process = subprocess.run(
            argv, env=server.env, cwd=log.parent, stdout=sink, stderr=subprocess.STDOUT, timeout=120
        )
    return process.returncode, log.read_text(errors="replace")


# --- two servers on one database ----------------------------------------------------------


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_second_server_leaves_a_running_tool_call_alone(engine: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with database(engine, tmp_path) as url:
        first = Server(url, data, tmp_path / "first.log", {})
        with running(first):
            cid = conversation(first)
            stream, workdir = approved_shell(first, cid, BLOCKED)
            before = rows(first, cid)
            call = shell_call(before)
            assert results_for(before, call) == []

            # One that cannot bind the port exits and has changed nothing.
            port = int(first.url.rsplit(":", 1)[1])
            code, output = serve_on_taken_port(first, port, tmp_path / "taken.log")
            assert code != 0, output
            assert "address already in use" in output.lower(), output
            assert rows(first, cid) == before
            assert len(running_in_db(url, cid)) == 2  # the turn and its shell call

            # One that serves starts, recovers nothing of the live server, and serves.
            second = Server(url, data, tmp_path / "second.log", {})
            with running(second):
                assert rows(second, cid) == before
                assert state(second, cid) == "running"
                other = conversation(second)
                answer = second.post(f"/v1/conversations/{other}/turns", {"text": "hello"})
                assert answer.status_code == 200 and answer.json()["stop_reason"] == "end_turn"

                (workdir / "go").touch()
                finished = stream.until_type("turn.finished", WAIT).data
                assert finished["stop_reason"] == "end_turn"
                after = rows(second, cid)
                assert tool_pairs(after) == []
                (result,) = results_for(after, call)
                assert "finished" in result_text(result) and not result["is_error"]
                assert state(second, cid) == "idle"
                assert "left running" not in second.tail(200)
            assert running_in_db(url, cid) == []


# --- SIGTERM --------------------------------------------------------------------------------


def descendants(server: Server) -> list[psutil.Process]:
    assert server.pid is not None
    found: list[psutil.Process] = psutil.Process(server.pid).children(recursive=True)
    return found


def survivors(processes: list[psutil.Process]) -> list[str]:
    alive = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(f"{process.pid} {process.cmdline()} ppid {process.ppid()}")
        except psutil.NoSuchProcess:
            pass
    return alive


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_sigterm_cancels_a_long_shell_call_after_the_grace(engine: str, tmp_path: Path) -> None:
    with database(engine, tmp_path) as url:
        env = {"OSTINATO_SERVER__SHUTDOWN_GRACE_S": "1"}
        server = Server(url, tmp_path / "data", tmp_path / "serve.log", env)
        server.start()
        try:
            cid = conversation(server)
            stream, _ = approved_shell(server, cid, "touch started; sleep 30")
            children = descendants(server)
            assert any("sleep" in " ".join(p.cmdline()) for p in children), children
        except BaseException:
            server.kill()
            raise
        code = server.terminate()
        assert code in (0, -signal.SIGTERM), f"exit {code}:\n{server.tail()}"
        psutil.wait_procs(children, timeout=10)
        assert survivors(children) == []
        stream.finish()
        finished = [f.data for f in stream.frames if f.event == "turn.finished"]
        assert [f["stop_reason"] for f in finished] == ["cancelled"]
        assert running_in_db(url, cid) == []
        # Read back by a new server: its start recovers nothing, the rows are as left.
        with running(Server(url, tmp_path / "data", tmp_path / "again.log", {})) as again:
            after = rows(again, cid)
            assert tool_pairs(after) == []
            (result,) = results_for(after, shell_call(after))
            assert result["is_error"] and "interrupted" in result_text(result)
            assert state(again, cid) == "idle"
        assert turn_endings(url, cid) == ["cancelled"]


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_sigterm_lets_a_turn_finish_within_the_grace_and_refuses_new_ones(
    engine: str, tmp_path: Path
) -> None:
    with database(engine, tmp_path) as url:
        server = Server(url, tmp_path / "data", tmp_path / "serve.log", {})
        server.start()
        try:
            cid = conversation(server)
            stream, workdir = approved_shell(server, cid, BLOCKED)
            other = conversation(server)
            assert server.pid is not None
            os.kill(server.pid, signal.SIGTERM)
            wait_for(lambda: server.get("/healthz").status_code == 503, "/healthz says draining")
            refused = server.post(f"/v1/conversations/{other}/turns", {"text": "hello"})
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"]["code"] == "shutting_down"
            assert int(refused.headers["retry-after"]) > 0
            (workdir / "go").touch()
            finished = stream.until_type("turn.finished", WAIT).data
            assert finished["stop_reason"] == "end_turn"
        except BaseException:
            server.kill()
            raise
        assert server.popen is not None
        code = server.popen.wait(timeout=WAIT)
        server.pid = server.popen = None
        assert code in (0, -signal.SIGTERM), f"exit {code}:\n{server.tail()}"
        assert running_in_db(url, cid) == []
        with running(Server(url, tmp_path / "data", tmp_path / "again.log", {})) as again:
            after = rows(again, cid)
            assert tool_pairs(after) == []
            (result,) = results_for(after, shell_call(after))
            assert "finished" in result_text(result)
            assert state(again, cid) == "idle"
            assert [r for r in rows(again, other) if r["role"] == "user"] == []


# --- queue order ------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_twenty_queued_messages_run_in_the_order_they_were_told(
    engine: str, tmp_path: Path
) -> None:
    with database(engine, tmp_path) as url:
        server = Server(url, tmp_path / "data", tmp_path / "serve.log", {})
        with running(server):
            cid = conversation(server)
            stream, workdir = approved_shell(server, cid, BLOCKED)
            watcher = server.stream("GET", f"/v1/conversations/{cid}/events?deltas=false")
            assert watcher.started_event.wait(WAIT) and watcher.status == 200
            turns = f"{server.url}/v1/conversations/{cid}/turns"

            def send(i: int) -> dict[str, Any]:
                answer = httpx.post(turns, json={"text": f"message {i}"}, timeout=120)
                assert answer.status_code == 200, answer.text
                body: dict[str, Any] = answer.json()
                return body

            with ThreadPoolExecutor(20) as pool:
                futures = [pool.submit(send, i) for i in range(20)]
                for _ in range(20):
                    watcher.until_type("input.queued", WAIT)
                (workdir / "go").touch()
                answers = [f.result() for f in futures]
            stream.finish()
        by_position = sorted(answers, key=lambda a: a["queued_position"])
        seqs = [a["messages"][0]["seq"] for a in by_position]
        assert seqs == sorted(seqs), [
            (a["queued_position"], a["messages"][0]["seq"]) for a in by_position
        ]
        assert all(a["stop_reason"] == "end_turn" for a in answers)
