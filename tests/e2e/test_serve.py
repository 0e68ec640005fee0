"""End to end: ``ostinato serve`` as a real process, spoken to over a real socket.

The issue's "done when": open a conversation, send ``/tool calculator`` to the offline
model with SSE, see the tool step and the answer stream back; stop the server (SIGTERM),
start it again on the same database, and read the same rows from ``/messages``.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.server.sse_client import frames, parse_stream

PROVIDER_ENV = (
    "OSTINATO_MODEL",
    "OSTINATO_BASE_URL",
    "OSTINATO_DATABASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OLLAMA_BASE_URL",
)
COMMAND = '/tool calculator {"expression": "2*(3+4)"}'


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def serving(database: Path, port: int, log: Path) -> Iterator[str]:
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_ENV}
    # Nothing answers here, so model autodetection does not find a local Ollama.
    env["OLLAMA_BASE_URL"] = f"http://127.0.0.1:{_free_port()}/v1"
    command = [sys.executable, "-m", "ostinato", "serve", "--port", str(port)]
    command += ["--database-url", f"sqlite:///{database}"]
    with log.open("ab") as sink:
        process = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, f"ostinato serve exited:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"no /healthz after 30 s:\n{log.read_text()}"
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    # uvicorn shuts down gracefully, then re-raises the signal it caught, so the exit
    # status says SIGTERM; the log shows the lifespan's shutdown ran (runtime closed).
    assert code in (0, -signal.SIGTERM), f"exit {code} on SIGTERM:\n{log.read_text()}"
    assert log.read_text().count("Application shutdown complete") >= 1


class _Watcher(threading.Thread):
    """Reads an event stream to its end in the background."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.body = ""
        self.connected = threading.Event()

    def run(self) -> None:
        with httpx.stream("GET", self.url, timeout=30) as response:
            for text in response.iter_text():
                self.body += text
                self.connected.set()


def _watch(url: str) -> _Watcher:
    watcher = _Watcher(url)
    watcher.start()
    assert watcher.connected.wait(10), "the event stream did not start"
    return watcher


def test_serve_streams_a_tool_turn_and_keeps_its_rows_across_a_restart(tmp_path: Path) -> None:
    if not hasattr(importlib.import_module("ostinato.store"), "open_store"):
        pytest.skip("ostinato.store.open_store (the SQL store) is not available yet")
    database, log = tmp_path / "x.db", tmp_path / "serve.log"
    port = _free_port()
    with serving(database, port, log) as url:
        created = httpx.post(f"{url}/v1/conversations")
        assert created.status_code == 201
        cid = created.json()["id"]
        with httpx.stream(
            "POST",
            f"{url}/v1/conversations/{cid}/turns",
            json={"text": COMMAND},
            headers={"accept": "text/event-stream"},
            timeout=30,
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            body = response.read().decode()
        before = httpx.get(f"{url}/v1/conversations/{cid}/messages").json()["messages"]
        last = before[-1]["seq"]
        watcher = _watch(f"{url}/v1/conversations/{cid}/events?after_seq={last - 1}")
    # An open event stream does not hold up the shutdown: the server ends it.
    watcher.join(timeout=15)
    assert not watcher.is_alive()
    watched = frames(parse_stream(watcher.body))
    assert [e.event for e in watched] == ["message", "error"]
    assert watched[0].id == str(last) and watched[1].data["code"] == "closing"

    events = frames(parse_stream(body))
    types = [e.event for e in events]
    assert types[0] == "turn.started" and types[-1] == "turn.finished"
    # a memory recall runs first as a hidden turn-zero seed (category "read")
    started = next(
        e.data for e in events if e.event == "tool.started" and e.data["category"] != "read"
    )
    assert started["name"] == "calculator" and started["input"] == {"expression": "2*(3+4)"}
    finished = next(
        e.data for e in events if e.event == "tool.finished" and e.data["name"] == "calculator"
    )
    assert finished["status"] == "ok" and finished["result"] == "2*(3+4) = 14"
    answer = "".join(e.data["text"] for e in events if e.event == "text.delta")
    assert "14" in answer.split("returned:")[-1]
    assert events[-1].data["stop_reason"] == "end_turn"
    streamed = [e.data["message"] for e in events if e.event == "message"]
    # the hidden rows (the turn-zero recall) stream too, flagged; /messages leaves them out
    assert [(m["role"], m["hidden"]) for m in streamed] == [
        ("user", False),
        ("assistant", True),
        ("tool", True),
        ("assistant", False),
        ("tool", False),
        ("assistant", False),
    ]
    assert before == [m for m in streamed if not m["hidden"]]

    output = log.read_text()
    assert "model:    offline:ostinato" in output
    assert f"database: sqlite:///{database}" in output

    with serving(database, port, log) as url:
        after = httpx.get(f"{url}/v1/conversations/{cid}/messages").json()["messages"]
        conversation = httpx.get(f"{url}/v1/conversations/{cid}").json()
    assert after == before
    assert conversation["state"] == "idle"
    assert json.dumps(after)  # plain JSON all the way
