"""The AI SDK's own code (the pinned ``ai`` package from npm, run by Node) reads a turn
of ``POST /v1/ai-sdk/chat`` into a UIMessage with text and tool parts, and answers an
approval the way ``addToolApprovalResponse`` does. The server is the app under uvicorn
with a scripted model. Needs ``node`` and ``npm ci`` in this folder (``.ci/run`` does it)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from ostinato.models.scripted import text_step, tool_step
from tests.cli.conftest import LiveServer

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "read_turn.mjs"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (HERE / "node_modules" / "ai").is_dir(),
    reason="needs node and `npm ci` in tests/ai_sdk (.ci/run installs them)",
)


def read(url: str, chat_id: str, text: str, *mode: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        ["node", str(SCRIPT), url, chat_id, text, *mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def test_a_turn_becomes_a_uimessage_with_text_and_tool_parts(live_server: LiveServer) -> None:
    live_server.model.add(
        tool_step(("calculator", {"expression": "6*7"}), text="Let me see."),
        text_step("It is 42.", chunks=3),
    )
    (message,) = read(live_server.url, "chat-1", "what is 6*7?")
    assert message["role"] == "assistant"
    assert message["metadata"] == {"conversationId": "chat-1"}
    kinds = [p["type"] for p in message["parts"]]
    texts = [p["text"] for p in message["parts"] if p["type"] == "text"]
    assert texts == ["Let me see.", "It is 42."]
    (tool,) = [p for p in message["parts"] if p["type"] == "dynamic-tool"]
    assert tool["toolName"] == "calculator" and tool["state"] == "output-available"
    assert tool["input"] == {"expression": "6*7"} and "42" in tool["output"]
    assert kinds.count("step-start") == 2
    rows = httpx.get(f"{live_server.url}/v1/conversations/chat-1/messages").json()["messages"]
    assert [r["role"] for r in rows if not r["hidden"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_an_approval_is_an_approval_part_and_its_answer_goes_on(live_server: LiveServer) -> None:
    live_server.model.add(
        tool_step(("shell", {"command": "echo via-ai-sdk"})), text_step("Ran it.")
    )
    first, second = read(live_server.url, "chat-2", "run it", "approve")
    (asked,) = [p for p in first["parts"] if p["type"] == "dynamic-tool"]
    assert asked["state"] == "approval-requested" and asked["approval"]["id"]
    (ran,) = [p for p in second["parts"] if p["type"] == "dynamic-tool"]
    assert ran["state"] == "output-available" and "via-ai-sdk" in ran["output"]
    assert [p["text"] for p in second["parts"] if p["type"] == "text"] == ["Ran it."]
