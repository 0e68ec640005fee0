"""``ostinato serve`` as a real process that a test can SIGKILL and start again, and a
Server-Sent Events reader that runs in a thread (so a test can wait for a given frame,
then kill the server while the stream is open).

The server never sees a real provider's variables: ``env`` is what the test gives it on
top of a cleaned copy of this process's environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import psutil

from tests.patience import start_timeout
from tests.server.sse_client import Event, SSEParser

PROVIDER_ENV = (
    "OSTINATO_MODEL",
    "OSTINATO_BASE_URL",
    "OSTINATO_API_KEY",
    "OSTINATO_DATABASE_URL",
    "OSTINATO_DATA_DIR",
    "OSTINATO_APPROVAL_TIMEOUT",
    "OSTINATO_ALLOW_CALLER_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OLLAMA_BASE_URL",
    "OSTINATO_CONFIG",
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def server_env(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without any provider's variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_ENV}
    # Nothing answers here, so model autodetection does not find a local Ollama.
    env["OLLAMA_BASE_URL"] = f"http://127.0.0.1:{free_port()}/v1"
    env.update(extra)
    return env


FORKSERVER = Path(__file__).with_name("forkserver.py")


class ForkServer:
    """``forkserver.py`` running: ``spawn`` starts ``ostinato <argv>`` in a forked child
    (ostinato already imported) and returns its pid."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(FORKSERVER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=server_env({}),
            text=True,
        )
        assert self.process.stdout is not None
        ready = self.process.stdout.readline().strip()
        assert ready == "ready", f"the fork server did not start: {ready!r}"

    def spawn(self, argv: list[str], env: Mapping[str, str], log: Path) -> int:
        assert self.process.stdin is not None and self.process.stdout is not None
        request = {"argv": argv, "env": dict(env), "log": str(log), "cwd": str(log.parent)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return int(self.process.stdout.readline())

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Server:
    """One database and data dir; a server process on it that can be killed and restarted.

    ``kill()`` is a crash: SIGKILL, no shutdown code runs. The processes the server had
    started (a ``shell`` tool's command, in a session of its own) are killed too, by pid:
    a crashed host would not keep them, and a test must not leave them behind.
    """

    def __init__(
        self,
        database_url: str,
        data_dir: Path,
        log: Path,
        env: Mapping[str, str],
        approval_timeout: float = 600.0,
        forks: ForkServer | None = None,
    ) -> None:
        self.database_url = database_url
        self.data_dir = data_dir
        self.log = log
        self.env = server_env(env)
        self.approval_timeout = approval_timeout
        self.forks = forks
        self.pid: int | None = None
        self.popen: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.starts = 0
        self.kills = 0
        self.start_seconds = 0.0  # spent waiting for the server to come up

    def start(self) -> str:
        assert self.pid is None, "already running"
        port = free_port()
        argv = ["serve", "--port", str(port), "--database-url", self.database_url]
        argv += ["--data-dir", str(self.data_dir), "--approval-timeout", str(self.approval_timeout)]
        with self.log.open("ab") as sink:
            sink.write(f"\n===== start {self.starts + 1} =====\n".encode())
        if self.forks is not None:
            self.pid = self.forks.spawn(argv, self.env, self.log)
        else:
            with self.log.open("ab") as sink:
                self.popen = subprocess.Popen(
                    [sys.executable, "-m", "ostinato", *argv],
                    env=self.env,
                    cwd=self.log.parent,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                )
            self.pid = self.popen.pid
        self.starts += 1
        self.url = f"http://127.0.0.1:{port}"
        began = time.monotonic()
        patience = start_timeout()
        deadline = began + patience
        while True:
            if not self.alive():
                self.pid = self.popen = None
                raise AssertionError(f"ostinato serve exited:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no /healthz after {patience:g} s:\n{self.tail()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    self.start_seconds += time.monotonic() - began
                    return self.url
            except httpx.HTTPError:
                pass
            time.sleep(0.02)

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        if self.pid is None:
            return False
        try:
            status: str = psutil.Process(self.pid).status()
        except psutil.NoSuchProcess:
            return False
        return bool(status != psutil.STATUS_ZOMBIE)

    def kill(self) -> None:
        """SIGKILL the server (a crash), then what it had started."""
        pid, popen = self.pid, self.popen
        if pid is None:
            return
        self.pid = self.popen = None
        self.kills += 1
        children: list[psutil.Process] = []
        with contextlib.suppress(ProcessLookupError, psutil.NoSuchProcess):
            os.kill(pid, signal.SIGSTOP)  # no new children from here on
            children = psutil.Process(pid).children(recursive=True)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        if popen is not None:
            popen.wait(timeout=30)
        else:
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).wait(timeout=30)
        for child in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.send_signal(signal.SIGKILL)
        psutil.wait_procs(children, timeout=10)

    def restart(self) -> str:
        self.kill()
        return self.start()

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM the server (a graceful stop) and wait for it to exit; its exit code
        (uvicorn re-raises the signal it caught, so a clean stop is ``-SIGTERM``)."""
        pid, popen = self.pid, self.popen
        assert pid is not None and popen is not None, "terminate() needs a plain start"
        self.pid = self.popen = None
        popen.send_signal(signal.SIGTERM)
        try:
            return popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait()
            raise AssertionError(f"no exit {timeout} s after SIGTERM:\n{self.tail()}") from None

    def tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # --- requests --------------------------------------------------------------------

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return httpx.get(f"{self.url}{path}", timeout=kw.pop("timeout", 60), **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> httpx.Response:
        return httpx.post(f"{self.url}{path}", json=body, timeout=kw.pop("timeout", 60), **kw)

    def stream(self, method: str, path: str, body: Any = None) -> SSEReader:
        return SSEReader(method, f"{self.url}{path}", body)


class SSEReader(threading.Thread):
    """Reads one SSE response in the background; the test waits for frames by predicate.

    The stream ends when the server ends it or dies (a killed server closes the socket).
    """

    def __init__(
        self, method: str, url: str, body: Any = None, client: httpx.Client | None = None
    ) -> None:
        super().__init__(daemon=True)
        self.method, self.url, self.body = method, url, body
        self.client = client  # a shared one (making a client costs milliseconds)
        self.status: int | None = None
        self.error_body = ""
        self.frames: list[Event] = []
        self._queue: queue.Queue[Event | None] = queue.Queue()
        self._read = 0
        self.started_event = threading.Event()
        self.start()

    def run(self) -> None:
        parser = SSEParser()
        try:
            headers = {"accept": "text/event-stream"}
            content = json.dumps(self.body).encode() if self.body is not None else None
            if content is not None:
                headers["content-type"] = "application/json"
            timeout = httpx.Timeout(10.0, read=120.0)
            opener = self.client.stream if self.client is not None else httpx.stream
            with opener(
                self.method, self.url, content=content, headers=headers, timeout=timeout
            ) as response:
                self.status = response.status_code
                self.started_event.set()
                if response.status_code != 200:
                    self.error_body = response.read().decode(errors="replace")
                    return
                for text in response.iter_text():
                    for event in parser.feed(text):
                        if event.event is not None:
                            self.frames.append(event)
                            self._queue.put(event)
        except (httpx.HTTPError, OSError):
            pass  # the server died under us: that is the point
        finally:
            self.started_event.set()
            self._queue.put(None)

    def next_frame(self, timeout: float = 60.0) -> Event:
        """The next frame; ``EOFError`` when the stream ended, ``TimeoutError`` if none."""
        try:
            event = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no frame within {timeout} s on {self.url}") from None
        if event is None:
            self._queue.put(None)  # stays ended
            seen = [(e.event, e.data) for e in self.frames]
            raise EOFError(f"the stream ended: {self.url} ({self.status}) {self.error_body} {seen}")
        return event

    def until(self, accept: Callable[[Event], bool], timeout: float = 60.0) -> Event:
        """Read frames until one is accepted; returns it."""
        deadline = time.monotonic() + timeout
        while True:
            event = self.next_frame(max(0.01, deadline - time.monotonic()))
            if accept(event):
                return event

    def until_type(self, frame_type: str, timeout: float = 60.0) -> Event:
        return self.until(lambda e: e.event == frame_type, timeout)

    def finish(self, timeout: float = 30.0) -> None:
        """Wait for the stream to end (after the server was killed, it does at once)."""
        self.join(timeout)
