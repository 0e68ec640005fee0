"""What the browser tests drive: ``ostinato serve`` as a real process on a fixed port
(so a restarted server is the same address to the page), talking to the fake provider,
and a headless Debian Chromium (Playwright's own browser download does not work here).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock
from ostinato.store import open_store
from ostinato.store.base import AppendMessage, Conversation, CreateConversation, utcnow
from tests.e2e.server import free_port, server_env
from tests.patience import start_timeout

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


class Site:
    """One database and data dir, served by ``ostinato serve`` on one port."""

    def __init__(self, root: Path, env: dict[str, str], approval_timeout: float = 600) -> None:
        self.root = root
        self.db = f"sqlite:///{root / 'web.db'}"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = server_env(env)
        self.approval_timeout = approval_timeout
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [sys.executable, "-m", "ostinato", "serve", "--port", str(self.port)]
        argv += ["--database-url", self.db, "--data-dir", str(self.root / "data")]
        argv += ["--approval-timeout", str(self.approval_timeout)]
        with (self.root / "serve.log").open("ab") as log:
            self.process = subprocess.Popen(
                argv, env=self.env, cwd=self.root, stdout=log, stderr=subprocess.STDOUT
            )
        patience = start_timeout()
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"ostinato serve exited:\n{self.log()}"
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"no /healthz after {patience:g} s:\n{self.log()}")

    def kill(self) -> None:
        """SIGKILL: a crash; nothing of the server's shutdown runs."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
            self.process = None

    def log(self) -> str:
        return (self.root / "serve.log").read_text(errors="replace")[-4000:]

    # --- the API, as another surface (curl) would use it --------------------------------

    def api(self, method: str, path: str, body: Any = None, key: str | None = None) -> Any:
        headers = {"authorization": f"Bearer {key}"} if key else {}
        response = httpx.request(
            method, f"{self.url}{path}", json=body, headers=headers, timeout=60
        )
        assert response.status_code < 300, (response.status_code, response.text)
        return response.json() if response.content else None

    def conversation(self, title: str | None = None, key: str | None = None) -> str:
        body = {"title": title} if title else {}
        cid: str = self.api("POST", "/v1/conversations", body, key=key)["id"]
        return cid

    def keys(self, *args: str) -> str:
        """``ostinato keys ARGS`` on this site's database: what it prints."""
        argv = [sys.executable, "-m", "ostinato", "keys", *args, "--database-url", self.db]
        done = subprocess.run(argv, env=self.env, cwd=self.root, capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr.decode()
        return done.stdout.decode()

    def new_key(self, owner: str) -> tuple[str, str]:
        """A new API key of ``owner``: its id, and the key."""
        printed = self.keys("create", "--owner", owner, "--name", "browser").split()
        key = printed[0]
        return key.split("_")[1], key


def fill(db_url: str, size: int, title: str) -> str:
    """A conversation of ``size`` stored rows (user and assistant in turn), written
    straight to the database before the server starts."""

    async def write() -> str:
        store = await open_store(db_url)
        try:
            now = utcnow()
            conversation = Conversation(new_id(), "idle", now, now, title=title)
            await store.write(CreateConversation(conversation))
            batch = []
            for i in range(size):
                role = "user" if i % 2 == 0 else "assistant"
                text = f"message {i}: the **quick** brown fox jumps over the lazy dog"
                batch.append(AppendMessage(conversation.id, Message(role, (TextBlock(text),))))
                if len(batch) == 500:
                    await store.write(*batch)
                    batch = []
            if batch:
                await store.write(*batch)
            return str(conversation.id)
        finally:
            await store.close()

    # in a thread of its own: Playwright's sync API keeps an event loop on this one
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, write()).result()


def browser_available() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not os.path.exists(CHROMIUM):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[dev]')"
    return None
