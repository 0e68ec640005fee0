"""Black box: ``ostinato replay`` of a conversation that a real ``ostinato serve`` made with
the default configuration (hidden recall seeds before every turn, memory tools), on
SQLite and PostgreSQL, says identical (issue 9 item 4).

The conversation has plain turns, tool calls (``calculator`` runs again on replay,
``clock`` is played back), a repetition stop with its wrap-up call, a retried call and a
failed turn. Both processes run outside the checkout, with no ``ostinato.toml``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.server import Server, server_env
from tests.e2e.test_provider_edge import database
from tests.e2e.test_turn_endings import EndingsChat, new_conversation, sse_turn

TURNS = [
    ("Hello!", "end_turn"),
    ('/tool calculator {"expression": "2*(3+4)"}', "end_turn"),
    ("/tool clock {}", "end_turn"),
    ("/loop", "crashed"),
    ("/flaky", "end_turn"),
    ("/break", "failed"),
    ("Thanks, bye.", "end_turn"),
]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, Path]]:
    tmp_path = tmp_path_factory.mktemp(f"replay-{request.param}")
    with database(request.param, tmp_path) as url, EndingsChat() as fake:
        env = {"OSTINATO_BASE_URL": f"{fake.url}/v1", "OSTINATO_API_KEY": "k"}
        server = Server(url, tmp_path / "data", tmp_path / "serve.log", env)
        server.start()
        try:
            yield server, tmp_path
        finally:
            server.kill()


def replay(server: Server, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "ostinato", "replay", *args]
    argv += ["--database-url", server.database_url]
    return subprocess.run(
        argv, cwd=cwd, env=server_env({}), capture_output=True, text=True, timeout=300
    )


def test_replay_of_a_default_conversation_is_identical(served: tuple[Server, Path]) -> None:
    server, tmp_path = served
    cid = new_conversation(server)
    for text, ending in TURNS:
        assert sse_turn(server, cid, text)[-1].data["stop_reason"] == ending, text
    rows = server.get(f"/v1/conversations/{cid}/messages?include_hidden=true").json()
    seeds = [r for r in rows["messages"] if r["metadata"].get("seed")]
    assert len(seeds) == len(TURNS)  # a hidden recall step before every turn
    done = replay(server, tmp_path, cid)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert sum(": OK" in line for line in lines) == len(TURNS), done.stdout
    assert lines[-1] == "identical"


def test_replay_takes_a_configuration_file(served: tuple[Server, Path]) -> None:
    """A file that switches off the calculator (the conversation used it) diverges; an
    unreadable one is a clear error, exit 2."""
    server, tmp_path = served
    cid = new_conversation(server)
    sse_turn(server, cid, '/tool calculator {"expression": "1+1"}')
    off = tmp_path / "off.toml"
    off.write_text('[tools]\ndisabled = ["calculator"]\n')
    diverged = replay(server, tmp_path, cid, "--config", str(off))
    assert diverged.returncode == 1 and "DIVERGED" in diverged.stdout, diverged.stderr
    broken = tmp_path / "broken.toml"
    broken.write_text("[tools\n")
    failed = replay(server, tmp_path, cid, "--config", str(broken))
    assert failed.returncode == 2 and "ostinato replay:" in failed.stderr
