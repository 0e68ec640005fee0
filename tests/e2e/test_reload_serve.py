"""A live configuration in a real ``ostinato serve`` (issue 29): SIGHUP reads the file
again; a good change applies (the owner's budget as ``/v1/usage`` says it), a broken one
changes nothing and the log says where the mistake is."""

from __future__ import annotations

import os
import signal
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
