"""The official AG-UI client (``@ag-ui/client`` 1.0.0's ``HttpAgent``, run by Node from
``tests/ag_ui``) against a live server on SQLite and on PostgreSQL: it renders a run with
a tool call into its messages, stops on an approval's interrupt and resumes it, answers
a question card's interrupt, and another owner's thread is a 404. The events are
checked against the ``ag-ui-protocol`` Python types too. Needs ``node`` and ``npm ci``
in tests/ag_ui (``.ci/run`` does it)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from ostinato.models.scripted import text_step, tool_step
from tests.server.live_protocols import Live

HERE = Path(__file__).resolve().parents[2] / "ag_ui"
SCRIPT = HERE / "run_agent.mjs"
EVENT: TypeAdapter[Any] = TypeAdapter(Event)

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (HERE / "node_modules" / "@ag-ui" / "client").is_dir(),
    reason="needs node and `npm ci` in tests/ag_ui (.ci/run installs them)",
)


def run(live: Live, thread: str, text: str, *mode: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        ["node", str(SCRIPT), live.url, live.keys["ann"], thread, text, *mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    runs = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    for one in runs:
        for event in one["events"]:
            EVENT.validate_python(event)  # each event is one of the protocol's types
    return runs


def types(one: dict[str, Any]) -> list[str]:
    return [e["type"] for e in one["events"]]


def test_a_run_with_a_tool_call_renders_into_messages(live: Live) -> None:
    live.model.add(
        tool_step(("calculator", {"expression": "6*7"}), text="Let me see."),
        text_step("It is 42.", chunks=3),
    )
    (one,) = run(live, "thread-tool", "what is 6*7?")
    kinds = types(one)
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    assert "STATE_SNAPSHOT" in kinds and "STATE_DELTA" in kinds
    assert kinds.count("TOOL_CALL_START") == 1 and kinds.count("TOOL_CALL_RESULT") == 1
    roles = [m["role"] for m in one["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    call = one["messages"][1]["toolCalls"][0]["function"]
    assert call["name"] == "calculator" and json.loads(call["arguments"]) == {"expression": "6*7"}
    assert one["messages"][1]["content"] == "Let me see."
    assert "42" in one["messages"][2]["content"]
    assert one["messages"][3]["content"] == "It is 42."
    assert one["pending"] == []


def test_an_approval_is_an_interrupt_and_resume_goes_on(live: Live) -> None:
    live.model.add(tool_step(("shell", {"command": "echo via-ag-ui"})), text_step("Ran it."))
    first, second = run(live, "thread-approve", "run it", "approve")
    (interrupt,) = first["pending"]
    assert interrupt["reason"] == "tool_approval" and interrupt["metadata"]["tool"] == "shell"
    assert "Answer yes" in interrupt["message"]
    custom = [e for e in first["events"] if e["type"] == "CUSTOM"]
    assert custom[-1]["name"] == "on_interrupt" and custom[-1]["value"]["id"] == interrupt["id"]
    assert first["events"][-1]["outcome"]["type"] == "interrupt"
    assert second["pending"] == [] and types(second)[-1] == "RUN_FINISHED"
    results = [e["content"] for e in second["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert "via-ag-ui" in results[0]
    assert second["messages"][-1]["content"] == "Ran it."


def test_a_question_card_is_an_interrupt_its_answer_resumes_it(live: Live) -> None:
    card = {"question": "Which colour?", "options": ["red", "blue"]}
    live.model.add(tool_step(("ask_user", card)), text_step("Blue it is."))
    first, second = run(live, "thread-card", "ask me", "answer=blue")
    (interrupt,) = first["pending"]
    assert interrupt["reason"] == "question"
    assert interrupt["responseSchema"]["properties"]["answer"]["enum"] == ["red", "blue"]
    assert second["messages"][-1]["content"] == "Blue it is."
    rows = httpx.get(
        f"{live.url}/v1/conversations/thread-card/messages", headers=live.headers()
    ).json()["messages"]
    assert any("blue" in json.dumps(r) for r in rows if r["role"] == "tool")


def test_another_owners_thread_is_a_404_and_tools_are_refused(live: Live) -> None:
    live.model.add(text_step("Ann's."))
    run(live, "anns-thread", "hello")
    body = {"threadId": "anns-thread", "runId": "r1",
            "messages": [{"id": "m", "role": "user", "content": "hi"}]}  # fmt: skip
    with httpx.Client(base_url=live.url) as http:
        bob = http.post("/v1/ag-ui", json=body, headers=live.headers("bob"))
        missing = http.post("/v1/ag-ui", json={**body, "threadId": "nobodys-thread",
                                                "resume": [{"interruptId": "x"}]},
                            headers=live.headers("bob"))  # fmt: skip
        tools = http.post("/v1/ag-ui", json={**body, "threadId": "t2", "tools": [
            {"name": "x", "description": "y"}]}, headers=live.headers())  # fmt: skip
    assert bob.status_code == 404
    assert bob.json()["error"]["message"] == "no conversation with id 'anns-thread'"
    assert missing.status_code == 409
    assert tools.status_code == 400 and tools.json()["error"]["code"] == "tools_not_supported"


def test_a_new_thread_stores_the_earlier_messages_and_a_dismissed_question_ends(
    live: Live,
) -> None:
    card = {"question": "Which colour?", "options": ["red", "blue"]}
    live.model.add(tool_step(("ask_user", card)))
    said = [
        {"id": "m1", "role": "user", "content": "earlier question"},
        {"id": "m2", "role": "assistant", "content": "earlier answer"},
        {"id": "m3", "role": "user", "content": "ask me"},
    ]
    body = {"threadId": "thread-new", "runId": "r1", "messages": said}
    with httpx.Client(base_url=live.url, headers=live.headers(), timeout=30) as http:
        first = http.post("/v1/ag-ui", json=body).text
        interrupt = [
            json.loads(line[6:]) for line in first.splitlines() if line.startswith("data: ")
        ]
        (waiting,) = interrupt[-1]["outcome"]["interrupts"]
        resume = [{"interruptId": waiting["id"], "status": "cancelled"}]
        second = http.post("/v1/ag-ui", json={**body, "runId": "r2", "resume": resume}).text
        rows = http.get("/v1/conversations/thread-new/messages").json()["messages"]
    events = [json.loads(line[6:]) for line in second.splitlines() if line.startswith("data: ")]
    assert [e["type"] for e in events] == ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert events[-1]["outcome"] == {"type": "cancelled"}
    texts = [r["blocks"][0].get("text") for r in rows if r["role"] in ("user", "assistant")]
    assert texts[:3] == ["earlier question", "earlier answer", "ask me"]
