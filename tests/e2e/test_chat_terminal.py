"""``ostinato chat`` in a real pseudo-terminal (pexpect) against a real ``ostinato serve``
(the offline model, whose ``/tool NAME {json}`` calls a tool): an approval answered with
"y", a question card answered by choosing an option, a card still waiting after the chat
is restarted, Ctrl-C cancelling a ``sleep 30`` shell call, and Ctrl-C twice leaving."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

import httpx
import pexpect
import pytest

from tests.e2e.server import Server, server_env

TIMEOUT = 30  # generous: a loaded machine; no assertion is about time but the sleep's


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("chat")
    env = {"OSTINATO_MODEL": "offline:ostinato"}
    server = Server(f"sqlite:///{tmp / 'chat.db'}", tmp / "data", tmp / "serve.log", env)
    try:
        yield server.start()
    finally:
        server.kill()


def spawn(url: str, *args: str) -> pexpect.spawn:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "ostinato", "chat", "--url", url, *args],
        env=server_env({"TERM": "xterm-256color", "COLUMNS": "160", "LINES": "50"}),
        dimensions=(50, 160),
        encoding="utf-8",
        timeout=TIMEOUT,
    )
    child.expect("type a message")
    return child


def conversation_of(child: pexpect.spawn) -> str:
    return str(child.before).split("conversation ")[1].split()[0]


def test_approve_with_y_then_choose_an_option(served: str) -> None:
    child = spawn(served)
    cid = conversation_of(child)
    child.sendline('/tool shell {"command": "echo hi-from-the-shell"}')
    child.expect(r"allow shell .*\? \[y\]es / \[n\]o / \[a\]lways: ")
    child.sendline("y")
    child.expect("approved")
    child.expect("hi-from-the-shell")
    child.expect("you> ")
    child.sendline('/tool ask_user {"question": "Which colour?", "options": ["red", "blue"]}')
    child.expect("Which colour\\?")
    child.expect("Reply with one of: 1. red; 2. blue.")
    child.expect("answer> ")
    child.sendline("2")
    child.expect("The tool returned: blue")
    child.expect("you> ")
    child.sendintr()
    child.expect("Ctrl-C again to leave")
    child.sendintr()
    child.expect(pexpect.EOF)
    rows = httpx.get(f"{served}/v1/conversations/{cid}/approvals").json()["approvals"]
    assert [(a["tool"], a["ending"]) for a in rows] == [("shell", "APPROVED")]


def test_a_waiting_card_is_asked_again_after_a_restart(served: str) -> None:
    child = spawn(served)
    cid = conversation_of(child)
    child.sendline('/tool ask_user {"question": "Tea or coffee?", "options": ["tea", "coffee"]}')
    child.expect("answer> ")
    child.sendline("")  # not now: it waits
    child.expect("the question waits")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    child = pexpect.spawn(
        sys.executable,
        ["-m", "ostinato", "chat", "--url", served, "--conversation", cid],
        env=server_env({"TERM": "xterm-256color"}),
        dimensions=(50, 160),
        encoding="utf-8",
        timeout=TIMEOUT,
    )
    child.expect("resumed")
    child.expect("Tea or coffee\\?")
    child.expect("answer> ")
    child.sendline("tea")
    child.expect("The tool returned: tea")
    child.sendline("/quit")
    child.expect(pexpect.EOF)


def test_ctrl_c_cancels_a_sleeping_shell_call(served: str) -> None:
    child = spawn(served)
    cid = conversation_of(child)
    child.sendline('/tool shell {"command": "sleep 30"}')
    child.expect("allow shell")
    child.sendline("y")
    child.expect("sleep 30")  # the spinner's line
    began = time.monotonic()
    child.sendintr()
    child.expect("cancelling")
    child.expect("turn ended cancelled")
    took = time.monotonic() - began
    print(f"Ctrl-C to 'turn ended cancelled': {took:.2f} s")
    assert took < 30  # the sleep did not run to its end (the figure is printed above)
    child.expect("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    calls = httpx.get(f"{served}/v1/conversations/{cid}/tool-calls").json()["tool_calls"]
    assert [(c["name"], c["status"]) for c in calls][-1] == ("shell", "interrupted")
    turns = httpx.get(f"{served}/v1/conversations/{cid}/turns").json()["turns"]
    assert turns[-1]["stop_reason"] == "cancelled"
