"""Black box: how turns end, against ``ostinato serve`` (a real process, the default
configuration) and a fake OpenAI-compatible server, over HTTP, on SQLite and PostgreSQL.

The fake (``EndingsChat``) answers like the crash test's (``/slow N``, ``/tool ...``),
checks every request against OpenAI's history rules, and answers four more commands:

- ``/cut-tool``: some text, then a tool call whose arguments never finish, then more
  text, then nothing (the stream stays open);
- ``/loop``: the same calculator call every time tools are on; with tools off, a sentence;
- ``/break``: two words, then an error object inside the stream (not retried);
- ``/flaky``: two words, then a retryable error; the retry answers whole.

Cases (issue 10 items 9, 10 and issue 9 item 8):

- a cancel after ten streamed deltas keeps exactly the text shown, marked cancelled, and
  the next request built from it is one the provider accepts;
- a cancel in the middle of a tool call keeps the text, never the call;
- a repetition stop ends ``crashed`` with a sentence for the person (the wrap-up call);
- a failure after deltas sends ``text.discarded`` before the ``error`` frame, stores no
  text, and the turn row keeps the error (what a page shows after a reload);
- a retry after deltas sends ``text.discarded``, and the deltas after it are the row.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # makes `fakes` importable

from fakes.openai_chat import chunk, stream_error, usage_chunk
from fakes.server import Event, Stream
from tests.e2e.fake_model import AnsweringChat, _text_events
from tests.e2e.server import Server
from tests.e2e.test_provider_edge import database
from tests.server.sse_client import frames, parse_stream

CUT_OFF = "[cut off: the user cancelled the turn before this reply was finished]"


class EndingsChat(AnsweringChat):
    """The crash test's fake plus the commands in the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self._flaky = itertools.count()

    def respond(self, body: dict[str, Any]) -> Stream:
        messages = body.get("messages") or []
        said = _last_user_text(messages)
        tools_on = bool(body.get("tools")) and body.get("tool_choice") != "none"
        if said == "/loop":
            return self._loop(tools_on)
        if said == "/cut-tool":
            return Stream(_cut_tool_events(), hang=True)
        if said == "/break":
            events = _text_events(["Half ", "an "])[:3]
            events.append(stream_error("invalid_request_error", "the model broke", None))
            return Stream(events)
        if said == "/flaky" and next(self._flaky) % 2 == 0:
            events = _text_events(["Parti", "al "])[:3]
            events.append(stream_error("server_error", "try again", None))
            return Stream(events)
        if said == "/flaky":
            return Stream(_text_events(["The ", "whole ", "answer."]))
        return super().respond(body)

    def _loop(self, tools_on: bool) -> Stream:
        if not tools_on:  # the wrap-up call
            return Stream(_text_events(["I kept computing 1+1 and stopped there."]))
        call = {
            "index": 0,
            "id": f"call_{next(self._ids)}",
            "type": "function",
            "function": {"name": "calculator", "arguments": '{"expression": "1+1"}'},
        }
        events: list[Event] = [
            (None, chunk({"role": "assistant", "content": ""})),
            (None, chunk({"tool_calls": [call]})),
            (None, chunk({}, finish_reason="tool_calls")),
            (None, usage_chunk(10, 5)),
            (None, "[DONE]"),
        ]
        return Stream(events)


def _cut_tool_events() -> list[Event]:
    call = {
        "index": 0,
        "id": "call_cut",
        "type": "function",
        "function": {"name": "calculator", "arguments": '{"expression": "2*'},
    }
    return [
        (None, chunk({"role": "assistant", "content": ""})),
        (None, chunk({"content": "Let me work that out. "})),
        (None, chunk({"tool_calls": [call]})),
        (None, chunk({"content": "Still on it."})),  # the call above was read before this
    ]


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    """The person's newest message (the loop's notes after tool results, which OpenAI's
    format also carries as ``user`` messages, are passed over)."""
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, str):
            continue
        if not content.startswith("Note: "):
            return content.strip()
    return ""


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, EndingsChat]]:
    tmp_path = tmp_path_factory.mktemp(f"endings-{request.param}")
    with database(request.param, tmp_path) as url, EndingsChat() as fake:
        env = {"OSTINATO_BASE_URL": f"{fake.url}/v1", "OSTINATO_API_KEY": "k"}
        # no title call: the tests read the model's last request, which a title would race
        env["OSTINATO_DATA__TITLES"] = "off"
        server = Server(url, tmp_path / "data", tmp_path / "serve.log", env)
        server.start()
        try:
            yield server, fake
        finally:
            server.kill()


def new_conversation(server: Server) -> str:
    answer = server.post("/v1/conversations")
    assert answer.status_code == 201, answer.text
    cid: str = answer.json()["id"]
    return cid


def visible_rows(server: Server, cid: str) -> list[dict[str, Any]]:
    path = f"/v1/conversations/{cid}/messages?include_hidden=false"
    rows: list[dict[str, Any]] = server.get(path).json()["messages"]
    return rows


def text_of(row: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in row["blocks"] if b["type"] == "text")


def sse_turn(server: Server, cid: str, text: str) -> list[Any]:
    with httpx.stream(
        "POST",
        f"{server.url}/v1/conversations/{cid}/turns",
        json={"text": text},
        headers={"accept": "text/event-stream"},
        timeout=120,
    ) as answer:
        assert answer.status_code == 200
        body = answer.read().decode()
    return frames(parse_stream(body))


def cancel_after(server: Server, cid: str, text: str, deltas: int) -> list[Any]:
    """Stream a turn, cancel it once ``deltas`` text deltas came; its frames."""
    stream = server.stream("POST", f"/v1/conversations/{cid}/turns", {"text": text})
    for _ in range(deltas):
        stream.until_type("text.delta")
    assert server.post(f"/v1/conversations/{cid}/cancel").status_code == 200
    stream.until_type("turn.finished")
    stream.finish()
    return stream.frames


def test_cancel_after_ten_deltas_keeps_the_text_shown(served: tuple[Server, EndingsChat]) -> None:
    server, fake = served
    cid = new_conversation(server)
    seen = cancel_after(server, cid, "/slow 400", 10)
    shown = "".join(f.data["text"] for f in seen if f.event == "text.delta")
    assert shown.startswith("w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 ")
    assert "text.discarded" not in [f.event for f in seen]
    assert seen[-1].data["stop_reason"] == "cancelled"
    rows = visible_rows(server, cid)
    assert [r["role"] for r in rows] == ["user", "assistant"]
    assert text_of(rows[1]) == shown  # a reload shows what was shown live
    assert rows[1]["metadata"] == {"stop_reason": "cancelled", "partial": True}
    # The next turn's request carries it, marked cut off, and the provider accepts it.
    assert sse_turn(server, cid, "thanks")[-1].data["stop_reason"] == "end_turn"
    sent = fake.requests[-1]["messages"]
    assert any(m["role"] == "assistant" and CUT_OFF in str(m.get("content")) for m in sent)
    assert not fake.violations


def test_cancel_mid_tool_call_keeps_the_text_and_never_the_call(
    served: tuple[Server, EndingsChat],
) -> None:
    server, fake = served
    cid = new_conversation(server)
    cancel_after(server, cid, "/cut-tool", 2)
    rows = visible_rows(server, cid)
    assert [r["role"] for r in rows] == ["user", "assistant"]
    assert [b["type"] for b in rows[1]["blocks"]] == ["text"]
    assert text_of(rows[1]) == "Let me work that out. Still on it."
    assert rows[1]["metadata"]["cut_tool_call"] is True
    calls = server.get(f"/v1/conversations/{cid}/tool-calls").json()["tool_calls"]
    assert [c["name"] for c in calls] == ["recall"]  # the seed only, never the cut call
    assert sse_turn(server, cid, "never mind")[-1].data["stop_reason"] == "end_turn"
    sent = fake.requests[-1]["messages"]
    assert "call_cut" not in str(sent)
    assert not fake.violations


def test_a_repetition_stop_leaves_the_person_a_sentence(
    served: tuple[Server, EndingsChat],
) -> None:
    server, fake = served
    cid = new_conversation(server)
    seen = sse_turn(server, cid, "/loop")
    finished = seen[-1].data
    assert finished["stop_reason"] == "crashed" and finished["state"] == "idle"
    rows = visible_rows(server, cid)
    assert rows[-1]["role"] == "assistant"
    assert text_of(rows[-1]) == "I kept computing 1+1 and stopped there."
    assert fake.requests[-1]["tool_choice"] == "none"
    assert not fake.violations


def test_a_failure_after_deltas_says_to_drop_them_and_leaves_a_marker(
    served: tuple[Server, EndingsChat],
) -> None:
    server, _ = served
    cid = new_conversation(server)
    seen = sse_turn(server, cid, "/break")
    kinds = [f.event for f in seen]
    assert kinds[kinds.index("text.delta") :] == [
        "text.delta",
        "text.delta",
        "text.discarded",
        "error",
        "turn.finished",
    ]
    assert seen[kinds.index("text.discarded")].data["reason"] == "failed"
    assert [r["role"] for r in visible_rows(server, cid)] == ["user"]  # nothing half-kept
    (turn,) = server.get(f"/v1/conversations/{cid}/turns").json()["turns"]
    assert turn["stop_reason"] == "failed" and "the model broke" in turn["error"]
    state = server.get(f"/v1/conversations/{cid}").json()["state"]
    assert state == "failed"


def test_a_retry_after_deltas_discards_the_first_attempt(
    served: tuple[Server, EndingsChat],
) -> None:
    server, _ = served
    cid = new_conversation(server)
    seen = sse_turn(server, cid, "/flaky")
    kinds = [f.event for f in seen]
    at = kinds.index("text.discarded")
    assert kinds[at + 1] == "model.retrying" and seen[at].data["reason"] == "retry"
    after = "".join(f.data["text"] for f in seen[at:] if f.event == "text.delta")
    rows = visible_rows(server, cid)
    assert text_of(rows[-1]) == after == "The whole answer."
