"""Frames to completion pieces, without a server."""

from __future__ import annotations

import json

from ostinato.filters import NO_FILTERS, OutputFilters
from ostinato.frames import (
    ApprovalRequested,
    MessageCommitted,
    TextDeltaFrame,
    TextDiscarded,
    ToolFinished,
    ToolStarted,
    TurnFinished,
)
from ostinato.messages import Message, TextBlock
from ostinato.server.openai_compat.translate import Content, Finish, Reasoning, Reply
from ostinato.server.openai_compat.wire import Envelope, sse

R = {"run_id": "r", "seq": 1}


def said(reply: Reply, *frames: object) -> str:
    out = []
    for frame in frames:
        out += [p.text for p in reply.see(frame) if isinstance(p, Content)]  # type: ignore[arg-type]
    return "".join(out)


def row(text: str) -> MessageCommitted:
    return MessageCommitted(**R, message=Message("assistant", (TextBlock(text),)))


def test_two_replies_are_set_apart_and_an_unstreamed_row_is_said_whole() -> None:
    reply = Reply(NO_FILTERS)
    text = said(reply, TextDeltaFrame(**R, text="Calling."), row("Calling."), row("Done."))
    assert text == "Calling.\n\nDone."


def test_a_retried_call_does_not_say_its_words_twice() -> None:
    reply = Reply(NO_FILTERS)
    text = said(
        reply,
        TextDeltaFrame(**R, text="The answer "),
        TextDiscarded(**R, reason="retry"),
        TextDeltaFrame(**R, text="The answer is 42."),
        row("The answer is 42."),
    )
    assert text == "The answer is 42."


def test_filters_apply_across_deltas_and_progress_is_reasoning() -> None:
    reply = Reply(OutputFilters(drop_phrases=("um, ",)), progress=True)
    pieces = []
    for frame in (
        TextDeltaFrame(**R, text="So um"),
        TextDeltaFrame(**R, text=", yes"),
        ToolStarted(**R, tool_use_id="t", name="clock", input={}),
        ToolFinished(**R, tool_use_id="t", name="clock", status="ok", duration_s=0.01, result=""),
        row("So um, yes"),
        TurnFinished(**R, turn_id="t", stop_reason="end_turn", state="idle"),
    ):
        pieces += reply.see(frame)
    assert "".join(p.text for p in pieces if isinstance(p, Content)) == "So yes"
    assert [p.text for p in pieces if isinstance(p, Reasoning)] == [
        "Running clock.\n",
        "clock finished: ok (0.0 s).\n",
    ]
    assert isinstance(pieces[-1], Finish)


def test_an_approval_ends_the_completion_with_how_to_answer() -> None:
    reply = Reply(NO_FILTERS)
    asked = ApprovalRequested(
        **R, approval_id="a", tool_use_id="t", tool="shell", input={"command": "ls"}, risk="exec"
    )
    pieces = reply.see(asked)
    assert isinstance(pieces[-1], Finish) and pieces[-1].waiting is not None
    assert "Answer yes" in "".join(p.text for p in pieces if isinstance(p, Content))


def test_a_delta_event_is_the_chunk_it_stands_for() -> None:
    """A text delta's event is encoded around the delta only; its bytes are those of the
    whole chunk encoded, for any text and with or without usage."""
    for include_usage in (False, True):
        envelope = Envelope.new("abc", 'an "agent" \\ é', include_usage)
        for text in ("hi", "", 'é"\\ \n\x00 ☃ 😀 </script>', "\u2028"):
            for name in ("content", "reasoning_content"):
                event = envelope.delta_event(name, text)  # type: ignore[arg-type]
                assert event == sse(envelope.chunk({name: text}))
                assert json.loads(event.removeprefix(b"data: "))["choices"][0]["delta"] == {
                    name: text
                }
