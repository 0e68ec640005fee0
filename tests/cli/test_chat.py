"""``ostinato chat`` against a live server, fed from a stdin that is a string."""

from __future__ import annotations

import io
import socket

import httpx
import pytest

from ostinato.cli.chat import chat
from ostinato.cli.main import main
from ostinato.cli.sse import SSEDecoder
from ostinato.errors import ModelError
from ostinato.models.base import Retrying, Stop, TextDelta
from ostinato.models.scripted import Step, error_step, text_step, tool_step
from tests.cli.conftest import LiveServer


def _rows(server: LiveServer, cid: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = httpx.get(
        f"{server.url}/v1/conversations/{cid}/messages"
    ).json()["messages"]
    return rows


def _conversation_id(output: str) -> str:
    first = output.splitlines()[0]
    assert first.startswith("conversation "), first
    return first.split()[1]


def test_chat_streams_text_and_shows_tool_steps(live_server: LiveServer) -> None:
    live_server.model.add(
        tool_step(("calculator", {"expression": "2*(3+4)"}), text="Let me work it out."),
        text_step("It is 14.", chunks=3),
        text_step("You are welcome."),
    )
    out = io.StringIO()
    stdin = io.StringIO("what is 2*(3+4)?\n\n   \nthanks\n/quit\nnever sent\n")
    assert chat(live_server.url, stdin=stdin, stdout=out) == 0
    text = out.getvalue()
    assert "Let me work it out.\n" in text
    assert '  [tool] calculator {"expression": "2*(3+4)"}\n' in text
    assert "  [tool] calculator -> ok (" in text and "): 2*(3+4) = 14\n" in text
    assert "It is 14.\n" in text and "You are welcome.\n" in text
    assert text.index("[tool] calculator {") < text.index("-> ok") < text.index("It is 14.")
    live_server.model.assert_consumed()
    cid = _conversation_id(text)
    users = [r for r in _rows(live_server, cid) if r["role"] == "user"]
    assert len(users) == 2  # blank lines are not sent; nothing after /quit is


def test_chat_ends_at_end_of_input_and_resumes(live_server: LiveServer) -> None:
    live_server.model.add(text_step("first answer"), text_step("second answer"))
    out = io.StringIO()
    assert chat(live_server.url, stdin=io.StringIO("hello"), stdout=out) == 0
    cid = _conversation_id(out.getvalue())
    again = io.StringIO()
    assert chat(live_server.url, cid, stdin=io.StringIO("more\n"), stdout=again) == 0
    text = again.getvalue()
    assert text.startswith(f"conversation {cid} (resumed, 2 rows)\n")
    assert "  you: hello\n  assistant: first answer\n" in text
    assert "second answer" in text
    assert len(_rows(live_server, cid)) == 4


def test_chat_shows_a_failed_turn_and_goes_on(live_server: LiveServer) -> None:
    live_server.model.add(error_step(ModelError("the provider is down")), text_step("back"))
    out = io.StringIO()
    assert chat(live_server.url, stdin=io.StringIO("one\ntwo\n"), stdout=out) == 0
    text = out.getvalue()
    assert "  [error] model_error: the provider is down\n" in text
    assert "  [turn ended failed: model_error: the provider is down]\n" in text
    assert text.rstrip().endswith("back")


def test_unknown_conversation_and_unreachable_server(live_server: LiveServer) -> None:
    out = io.StringIO()
    assert chat(live_server.url, "nope", stdin=io.StringIO(""), stdout=out) == 1
    assert "404" in out.getvalue() and "nope" in out.getvalue()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = io.StringIO()
    assert chat(f"http://127.0.0.1:{port}", stdin=io.StringIO("hi\n"), stdout=out) == 1
    assert "cannot reach a server" in out.getvalue()


def test_main_runs_chat(
    live_server: LiveServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    live_server.model.add(text_step("hi there"))
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n/quit\n"))
    assert main(["chat", "--url", live_server.url]) == 0
    assert "hi there" in capsys.readouterr().out


def test_sse_decoder_follows_the_spec() -> None:
    decoder = SSEDecoder()
    events = decoder.feed(": ping\n\nevent: a\r\ndata: 1\ndata: 2\nid: 7\n\ndata: x")
    assert [(e.event, e.data, e.id) for e in events] == [("a", "1\n2", "7")]
    assert [(e.event, e.data) for e in decoder.feed("y\n\n")] == [(None, "xy")]


def test_chat_says_when_streamed_text_is_not_kept(live_server: LiveServer) -> None:
    live_server.model.add(
        Step(
            (
                TextDelta("Parti"),
                Retrying(1, 0.0, "overloaded"),
                TextDelta("The whole answer."),
                Stop("end_turn"),
            )
        )
    )
    out = io.StringIO()
    assert chat(live_server.url, stdin=io.StringIO("hi\n"), stdout=out) == 0
    text = out.getvalue()
    assert "Parti\n  [the text above was not kept]\n  [model busy, retrying" in text
    assert text.rstrip().endswith("The whole answer.")


def test_a_resumed_chat_shows_how_earlier_turns_ended(live_server: LiveServer) -> None:
    live_server.model.add(error_step(ModelError("the provider is down")), text_step("back"))
    out = io.StringIO()
    assert chat(live_server.url, stdin=io.StringIO("one\ntwo\n"), stdout=out) == 0
    cid = _conversation_id(out.getvalue())
    again = io.StringIO()
    assert chat(live_server.url, cid, stdin=io.StringIO(""), stdout=again) == 0
    assert again.getvalue().splitlines()[1:4] == [
        "  you: one",
        "  [turn ended failed: model_error: the provider is down]",
        "  you: two",
    ]


def test_chat_sends_its_key_from_the_flag_or_the_environment(
    keyed_server: LiveServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    key = keyed_server.key
    assert key is not None
    monkeypatch.delenv("OSTINATO_KEY", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n"))
    assert main(["chat", "--url", keyed_server.url]) == 1
    assert "401" in capsys.readouterr().out
    keyed_server.model.add(text_step("hi ann"), text_step("hi again"))
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n"))
    assert main(["chat", "--url", keyed_server.url, "--key", key]) == 0
    assert "hi ann" in capsys.readouterr().out
    monkeypatch.setenv("OSTINATO_KEY", key)
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n"))
    assert main(["chat", "--url", keyed_server.url]) == 0
    assert "hi again" in capsys.readouterr().out


def test_piped_chat_answers_an_approval_and_a_card_from_its_input(
    live_server: LiveServer,
) -> None:
    card = {"question": "Which colour?", "options": ["red", "blue"]}
    live_server.model.add(
        tool_step(("shell", {"command": "echo piped-approval"})),
        text_step("Ran it."),
        tool_step(("ask_user", card)),
        text_step("Blue, then."),
    )
    out = io.StringIO()
    stdin = io.StringIO("run it\ny\npaint\n2\n")
    assert chat(live_server.url, stdin=stdin, stdout=out) == 0
    text = out.getvalue()
    assert "  approved\n" in text and "piped-approval" in text and "Ran it." in text
    assert "Which colour?\nReply with one of: 1. red; 2. blue.\n" in text
    assert text.rstrip().endswith("Blue, then.")
    live_server.model.assert_consumed()


def test_commands_attach_model_new_and_open(live_server: LiveServer, tmp_path: object) -> None:
    from pathlib import Path

    notes = Path(str(tmp_path)) / "notes.md"
    notes.write_text("# Notes\nbuy milk\n")
    live_server.model.add(text_step("Read."), text_step("Back here."))
    out = io.StringIO()
    first = io.StringIO(f"/help\n/attach {notes}\nsee this\n/model\n/model nope\n/new\n")
    assert chat(live_server.url, stdin=first, stdout=out) == 0
    text = out.getvalue()
    cid = _conversation_id(text)
    assert "/attach PATH" in text and "attached to your next message: notes.md" in text
    assert "  ostinato  (agent)" in text and "the server answered 422" in text
    assert text.count("\nconversation ") == 1  # /new opened a second one
    user = _rows(live_server, cid)[0]
    assert any(b.get("name") == "notes.md" for b in user["blocks"])  # type: ignore[union-attr]
    again = io.StringIO()
    assert chat(live_server.url, stdin=io.StringIO(f"/open {cid}\nback\n"), stdout=again) == 0
    assert f"conversation {cid} (resumed, 2 rows)" in again.getvalue()
    assert len(_rows(live_server, cid)) == 4


CODE = """async (args) => {
  // a comment the person must see
  const f = args.celsius * 9 / 5 + 32;
  return {fahrenheit: f};
}"""


def test_an_approval_shows_a_tools_code_whole_and_any_call_on_v(forging_server: LiveServer) -> None:
    forged = {
        "name": "celsius_to_fahrenheit",
        "description": "Convert Celsius to Fahrenheit.",
        "parameters": {"type": "object", "properties": {"celsius": {"type": "number"}}},
        "code": CODE,
        "example": {"celsius": 100},
    }
    command = "echo " + " ".join(f"word{i}" for i in range(60)) + " the-end"
    forging_server.model.add(
        tool_step(("create_tool", forged)),
        text_step("Made it."),
        tool_step(("shell", {"command": command})),
        text_step("Ran it."),
    )
    out = io.StringIO()
    stdin = io.StringIO("make me a tool\ny\nrun something long\nwhat\nv\nn\n")
    assert chat(forging_server.url, stdin=stdin, stdout=out) == 0
    text = out.getvalue()
    # the code, every line of it, before the question, exactly as it will be stored
    shown = "\n".join("  │ " + line for line in CODE.split("\n"))
    assert text.index("create_tool asks to run with (exec):") < text.index(shown)
    assert text.index(shown) < text.index("  approved\n")
    assert '  parameters: {\n    "type": "object",' in text
    assert '  example: {\n    "celsius": 100\n  }' in text
    assert "Made it." in text and "  approved\n" in text
    # a long call is shown whole on v (the prompt line, cut, is for a terminal)
    assert "answer y, n, a (or v to see the whole call)" in text
    assert text.index("the-end") > text.index("shell asks to run with (exec):")  # after v
    assert f'  command: "{command}"' in text
    assert "  declined\n" in text
    forging_server.model.assert_consumed()
    rows = httpx.get(f"{forging_server.url}/v1/tools/forged").json()
    assert [t["code"] for t in rows["tools"]] == [CODE]  # what was shown is what is stored


def test_a_paused_view_leaves_no_spinner_on_screen() -> None:
    """Before an approval prompt (and after a cancel) the live part stops: its last
    render keeps the reply's text, not a spinner that no longer turns (issue 26)."""
    from rich.console import Console

    from ostinato.cli.chat.view import View
    from ostinato.frames import TextDeltaFrame, ToolStarted

    out = io.StringIO()
    view = View(Console(file=out, force_terminal=True, width=100))
    view.frame(TextDeltaFrame(run_id="r", seq=1, text="Running it now."))
    started = ToolStarted(run_id="r", seq=1, tool_use_id="t1", name="shell",
                          input={"command": "sleep 41"}, category="action")  # fmt: skip
    view.frame(started)
    out.seek(0)
    out.truncate()
    view.pause()  # the prompt comes next
    final = out.getvalue()
    assert "Running it now." in final and "sleep 41" not in final
    assert view.running  # the call still runs: its spinner comes back with the live part
