"""A live configuration in a real ``ostinato serve`` (issue 29): SIGHUP reads the file
again; a good change applies (the owner's budget as ``/v1/usage`` says it), a broken one
changes nothing and the log says where the mistake is."""

from __future__ import annotations

import http.server
import json
import os
import signal
import threading
import time
from pathlib import Path

from tests.e2e.server import Server

FILE = """
[budgets.default]
hard = {hard}
"""


def hard_limit(server: Server) -> float | None:
    budgets = server.get("/v1/usage").json()["budgets"]
    return budgets[0]["hard_usd"] if budgets else None


def wait_for(check: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the reload never showed"
        time.sleep(0.1)


def test_sighup_reloads_a_good_file_and_refuses_a_broken_one(tmp_path: Path) -> None:
    config = tmp_path / "ostinato.toml"
    config.write_text(FILE.format(hard=5.0))
    env = {"OSTINATO_CONFIG": str(config), "OSTINATO_BACKGROUND__JOBS__ENABLED": "false"}
    server = Server(f"sqlite:///{tmp_path / 'db.sqlite'}", tmp_path / "data", tmp_path / "log", env)
    server.start()
    try:
        assert server.pid is not None and hard_limit(server) == 5.0
        config.write_text(FILE.format(hard=7.5))
        os.kill(server.pid, signal.SIGHUP)
        wait_for(lambda: hard_limit(server) == 7.5)
        config.write_text(FILE.format(hard=-1))
        os.kill(server.pid, signal.SIGHUP)
        wait_for(lambda: "reload of" in server.tail())
        assert "budgets.default.hard: Input should be greater than or equal to 0" in server.tail()
        assert hard_limit(server) == 7.5 and server.alive()  # the old one runs on
    finally:
        server.kill()


class _Listing(http.server.BaseHTTPRequestHandler):
    """A model server whose start-up listing is answered only after the file changed
    and the SIGHUP was sent: the signal lands while ``ostinato serve`` starts."""

    def do_GET(self) -> None:
        hangup = getattr(self.server, "hangup", None)
        if hangup is not None:
            self.server.hangup = None  # type: ignore[attr-defined]
            hangup()
        body = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]})
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


def test_a_sighup_while_starting_is_kept_and_reloads_once_started(tmp_path: Path) -> None:
    """SIGHUP's default action ends a process: one that comes while the server starts
    (here, while it waits for its model server's listing) is kept, and read as a reload
    once the server listens for reloads."""
    config = tmp_path / "ostinato.toml"
    config.write_text(FILE.format(hard=5.0))
    models = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Listing)
    threading.Thread(target=models.serve_forever, daemon=True).start()
    env = {
        "OSTINATO_CONFIG": str(config),
        "OSTINATO_BACKGROUND__JOBS__ENABLED": "false",
        "OSTINATO_BASE_URL": f"http://127.0.0.1:{models.server_address[1]}/v1",
    }
    server = Server(f"sqlite:///{tmp_path / 'db.sqlite'}", tmp_path / "data", tmp_path / "log", env)

    def hangup() -> None:
        config.write_text(FILE.format(hard=7.5))
        assert server.pid is not None
        os.kill(server.pid, signal.SIGHUP)
        time.sleep(0.2)  # the signal is the process's before its listing comes

    models.hangup = hangup  # type: ignore[attr-defined]
    try:
        server.start()
        assert models.hangup is None  # type: ignore[attr-defined]
        wait_for(lambda: hard_limit(server) == 7.5)
        assert server.alive()
    finally:
        server.kill()
        models.shutdown()
