"""The Agent Protocol's JavaScript client (``@langchain/langgraph-sdk``, pinned, run by
Node) against ``ostinato serve`` (the offline model) on SQLite and PostgreSQL, making the
calls its React ``useStream`` hook makes: a thread with a tool call (values, message
chunks that add up to the message, updates), an interrupt answered by a resume command,
a cancelled run, and a stream joined again after an event; its crons (a cron on a
thread that runs, searched, counted, changed, deleted; a stateless one refused); and
stateless runs (``runs.stream(null, ...)``, ``runs.wait(null, ...)``). Needs
``node`` and ``npm ci`` in this folder (``.ci/run`` does it)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.hostile import serving

HERE = Path(__file__).resolve().parent
pytestmark = [
    pytest.mark.skipif(
        shutil.which("node") is None
        or not (HERE / "node_modules" / "@langchain" / "langgraph-sdk").is_dir(),
        reason="needs node and `npm ci` in tests/agent_protocol (.ci/run installs them)",
    ),
    pytest.mark.parametrize("engine", ["sqlite", "postgres"]),
]


def test_the_langgraph_js_client_runs_a_conversation(engine: str, tmp_path: Path) -> None:
    with serving(engine, tmp_path) as server:
        done = subprocess.run(
            ["node", str(HERE / "conversation.mjs"), server.url],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"metadata", "values", "messages", "updates"} <= set(seen["events"])
    assert seen["types"] == ["human", "ai", "tool", "ai"] and "42" in seen["final"]
    assert seen["chunks"] == seen["final"]
    assert seen["interrupt"]["value"]["type"] == "approval"
    assert seen["stateInterrupts"][0]["id"] == seen["interrupt"]["id"]
    assert any("via-js" in text for text in seen["afterResume"])
    assert (seen["heldBefore"], seen["heldAfter"]) == ("interrupted", "interrupted")
    assert seen["threadStatus"] == "idle"
    assert seen["rejoinedIds"] == seen["ids"][1:]


def test_the_langgraph_js_client_keeps_a_cron(engine: str, tmp_path: Path) -> None:
    with serving(engine, tmp_path) as server:
        done = subprocess.run(
            ["node", str(HERE / "crons.mjs"), server.url],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    cron = seen["cron"]
    assert cron["thread_id"] == seen["tid"] and cron["metadata"] == {"client": "js"}
    assert seen["said"][0] == ["human", "good evening"] and seen["said"][1][0] == "ai"
    assert seen["found"] == [cron["cron_id"]] and seen["count"] == 1
    updated = seen["updated"]
    assert (updated["schedule"], updated["enabled"], updated["next_run_date"]) == (
        "0 9 * * *",
        False,
        None,
    )
    assert seen["after"] == 0 and seen["stateless"] == 422


def test_the_langgraph_js_client_makes_stateless_runs(engine: str, tmp_path: Path) -> None:
    with serving(engine, tmp_path) as server:
        done = subprocess.run(
            ["node", str(HERE / "stateless.mjs"), server.url],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"metadata", "values", "messages", "end"} <= set(seen["events"])
    assert seen["created"]["run_id"] == seen["runId"] and seen["created"]["thread_id"]
    assert seen["types"] == ["human", "ai"] and seen["chunks"] > 0
    assert seen["after"] == 404  # its thread deleted once the run ended
    assert seen["waited"] == ["human", "ai"] and seen["found"] == [seen["keptThread"]]
