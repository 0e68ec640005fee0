"""``useChat``'s own machinery (the ``ai`` package's AbstractChat, run by Node: the pinned
``ai`` 7 and the ``ai`` 6 line Node 20 installs) against ``ostinato serve`` on the
offline model, with the ``sendAutomaticallyWhen`` docs/clients.md shows: a reply carries
no hidden lookup (the turn's memory recall) unless asked for, and a question card
answered with ``addToolOutput`` is sent and answered with nothing more (issue 26); and
``regenerate()`` and an edit (``sendMessage`` with a ``messageId``) each start a branch of
the stored conversation, appending nothing (issue 27)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.web.site import Site

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "use_chat.mjs"
PACKAGES = ["ai", "ai6"]  # ai 7.0.173 and ai 6.0.333 (package.json)
CHOOSE = {
    "question": "Which plan?",
    "options": [{"id": "a", "label": "Basic"}, {"id": "b", "label": "Premium"}],
}

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (HERE / "node_modules" / "ai6").is_dir(),
    reason="needs node and `npm ci` in tests/ai_sdk (.ci/run installs them)",
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    site = Site(tmp_path_factory.mktemp("use-chat"), {})  # no provider: the offline model
    site.start()
    yield site
    site.stop()


def use_chat(package: str, url: str, chat_id: str, text: str, *answer: str) -> dict[str, Any]:
    done = subprocess.run(
        ["node", str(SCRIPT), package, url, chat_id, text, *answer],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=HERE,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def tools(message: dict[str, Any]) -> list[str]:
    return [p["toolName"] for p in message["parts"] if p["type"] == "dynamic-tool"]


@pytest.mark.parametrize("package", PACKAGES)
def test_a_reply_shows_no_hidden_lookup(site: Site, package: str) -> None:
    sum_ = '/tool calculator {"expression": "6*7"}'
    _user, reply = use_chat(package, site.url, f"hidden-{package}", sum_)["messages"]
    assert tools(reply) == ["calculator"]  # not the turn's memory recall before it
    texts = [p["text"] for p in reply["parts"] if p["type"] == "text"]
    assert texts[-1] == "The tool returned: 6*7 = 42"
    rows = site.api("GET", f"/v1/conversations/hidden-{package}/messages?include_hidden=true")
    seeds = [r for r in rows["messages"] if r["hidden"] and r["role"] == "assistant"]
    assert [b["name"] for r in seeds for b in r["blocks"]] == ["recall"]  # it ran, unseen


def test_a_client_that_asks_sees_the_hidden_lookups(site: Site) -> None:
    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
    body = {"id": "hidden-asked", "messages": [user], "include_hidden": True}
    with httpx.stream("POST", f"{site.url}/v1/ai-sdk/chat", json=body, timeout=60) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data: {")]
    chunks = [json.loads(line[6:]) for line in lines]
    starts = [c["toolName"] for c in chunks if c["type"] == "tool-input-start"]
    assert starts == ["recall"]
    assert any(c["type"] == "tool-output-available" for c in chunks)


@pytest.mark.parametrize("package", PACKAGES)
def test_the_documented_snippet_answers_a_card_by_itself(site: Site, package: str) -> None:
    cid = f"card-{package}"
    chat = use_chat(package, site.url, cid, "/tool choose " + json.dumps(CHOOSE), '{"id": "a"}')
    assert chat["requests"] == 2  # the message, then the card's answer: sent automatically
    (reply,) = [m for m in chat["messages"] if m["role"] == "assistant"]
    (card,) = [p for p in reply["parts"] if p["type"] == "dynamic-tool"]
    assert card["state"] == "output-available" and card["output"] == {"id": "a"}
    texts = [p["text"] for p in reply["parts"] if p["type"] == "text"]
    assert texts[-1] == 'The tool returned: {"id": "a"}'  # the turn went on, on the server
    assert site.api("GET", f"/v1/conversations/{cid}")["state"] == "idle"
    (call,) = [c for c in site.api("GET", f"/v1/conversations/{cid}/tool-calls")["tool_calls"]
               if c["name"] == "choose"]  # fmt: skip
    assert call["status"] == "ok"


def test_regenerate_and_an_edit_branch_the_conversation(site: Site) -> None:
    first, edited = (
        '/tool calculator {"expression": "2+3"}',
        '/tool calculator {"expression": "2+4"}',
    )
    done = subprocess.run(
        ["node", str(HERE / "tree_chat.mjs"), "ai", site.url, "tree-ai", first, edited],
        capture_output=True, text=True, timeout=120, check=False, cwd=HERE,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    steps = json.loads(done.stdout.splitlines()[-1])
    for step, asked, said in (
        ("sent", first, "5"),
        ("regenerated", first, "5"),
        ("edited", edited, "6"),
    ):
        user, reply = steps[step]
        assert (user["role"], user["text"], reply["role"]) == ("user", asked, "assistant")
        assert reply["text"].endswith(f"= {said}"), reply
    assert steps["edited"][0]["id"] == steps["sent"][0]["id"]
    assert len({s[1]["id"] for s in steps.values()} | {steps["sent"][0]["id"]}) == 4
    base = "/v1/conversations/tree-ai"
    rows = site.api("GET", f"{base}/messages")["messages"]
    users = [r["blocks"][0]["text"] for r in rows if r["role"] == "user"]
    assert users == [edited]  # the current branch: the edit, answered once
    assert rows[0]["siblings"] is not None and len(rows[0]["siblings"]) == 2
    assert len(site.api("GET", f"{base}/branches")["leaves"]) == 3
    kinds = [t["kind"] for t in site.api("GET", f"{base}/turns")["turns"]]
    assert kinds.count("regenerate") == 1, kinds
