"""The ``openai`` npm package (pinned, run by Node) against ``ostinato serve`` in auth mode
``keys``: a conversation held through one conversation id, the second answer streamed
with its usage, and a tool turn's answer."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_openai_sdk import served

HERE = Path(__file__).resolve().parent
__all__ = ["served"]

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (HERE / "node_modules" / "openai").is_dir(),
    reason="needs node and `npm ci` in tests/ai_sdk (.ci/run installs them)",
)


def test_the_openai_npm_package_holds_a_conversation(served: tuple[str, str]) -> None:
    url, key = served
    done = subprocess.run(
        ["node", str(HERE / "openai_chat.mjs"), url, key],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["text"] == "Calling calculator.\n\nThe tool returned: 6*7 = 42"
    assert got["usage"]["total_tokens"] > 0
    rows = httpx.get(
        f"{url}/v1/conversations/{got['conversationId']}/messages",
        headers={"authorization": f"Bearer {key}"},
    ).json()["messages"]
    users = [r["blocks"][0]["text"] for r in rows if r["role"] == "user"]
    assert users == ["hello", '/tool calculator {"expression": "6*7"}']
