"""How a cut-short model call ends: a cancel keeps the text people saw, a failure or a
retry tells them to drop it (``text.discarded``), and a stop that needs a wrap-up always
leaves them a sentence."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence

import pytest

from ostinato.errors import ProviderUnavailable
from ostinato.frames import TextDiscarded
from ostinato.loop.decision import WRAP_UP_FALLBACK
from ostinato.loop.history import CUT_OFF
from ostinato.messages import ToolUseBlock
from ostinato.models.base import (
    ModelEvent,
    ModelRequest,
    Retrying,
    Stop,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from ostinato.models.scripted import Step, error_step, text_step, tool_step
from tests.loop.harness import Harness, assert_history_valid


class Cut:
    """A model call that streams ``events``, then hangs (``raises`` is None) or fails."""

    name = "test:cut"

    def __init__(self, events: Sequence[ModelEvent], raises: Exception | None = None) -> None:
        self.events = events
        self.raises = raises
        self.shown = asyncio.Event()  # every event was handed to the loop

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        for event in self.events:
            yield event
        self.shown.set()
        if self.raises is not None:
            raise self.raises
        await asyncio.Event().wait()  # until cancelled


async def cancelled_turn(h: Harness, cut: Cut) -> str:
    """Run a turn whose model call is ``cut`` and cancel it once everything has shown."""
    cid = await h.conversation()
    handle = await h.runtime.start_turn(cid, "tell me", model=cut)
    await asyncio.wait_for(cut.shown.wait(), 5)
    await h.runtime.cancel(cid)
    with pytest.raises(asyncio.CancelledError):
        await handle.task
    return cid


def frames_after(h: Harness, kind: str) -> list[str]:
    types = h.bus.types()
    return types[types.index(kind) :]


async def test_cancel_after_ten_deltas_keeps_the_text_shown_marked_cancelled() -> None:
    h = Harness(text_step("Go on."))
    cut = Cut([TextDelta(f"word{i} ") for i in range(10)])
    cid = await cancelled_turn(h, cut)
    rows = await h.messages(cid)
    assert [m.role for m in rows] == ["user", "assistant"]
    partial = rows[1]
    assert partial.text == "".join(f"word{i} " for i in range(10))  # exactly what streamed
    assert partial.metadata == {"stop_reason": "cancelled", "partial": True}
    assert frames_after(h, "message")[-2:] == ["message", "turn.finished"]
    assert "text.discarded" not in h.bus.types()
    (turn,) = await h.store.list_turns(cid)
    assert turn.stop_reason == "cancelled"
    assert (await h.store.get_conversation(cid)).state == "idle"  # type: ignore[union-attr]
    # The next request carries the partial text, marked as cut off.
    await h.runtime.run_turn(cid, "go on")
    sent = h.model.requests[-1].messages
    assert sent[1].role == "assistant" and sent[1].text == partial.text + "\n\n" + CUT_OFF
    assert_history_valid(list(sent))


async def test_cancel_mid_tool_call_stores_the_text_and_never_the_call() -> None:
    h = Harness(text_step("Fine."))
    cut = Cut(
        [
            TextDelta("Let me work that out. "),
            ToolCallStart(0, "call_1", "calculator"),
            ToolCallDelta(0, '{"expression": "2*'),
        ]
    )
    cid = await cancelled_turn(h, cut)
    rows = await h.messages(cid)
    assert [m.role for m in rows] == ["user", "assistant"]
    assert rows[1].blocks and not rows[1].tool_uses  # the half call is not a call
    assert rows[1].text == "Let me work that out. "
    assert rows[1].metadata["cut_tool_call"] is True
    assert await h.store.list_tool_calls(cid) == []
    await h.runtime.run_turn(cid, "never mind")
    sent = list(h.model.requests[-1].messages)
    assert not any(isinstance(b, ToolUseBlock) for m in sent for b in m.blocks)
    assert sent[1].text.endswith(CUT_OFF)  # never sent as a finished answer
    assert_history_valid(sent)


async def test_cancel_with_only_thinking_shown_stores_nothing_and_says_so() -> None:
    h = Harness()
    cid = await cancelled_turn(h, Cut([ThinkingDelta("hmm, let me think")]))
    assert [m.role for m in await h.messages(cid)] == ["user"]
    discarded = [f for f in h.bus.frames if isinstance(f, TextDiscarded)]
    assert [f.reason for f in discarded] == ["cancelled"]


async def test_cancel_before_anything_streamed_adds_no_row_and_no_frame() -> None:
    h = Harness()
    cid = await cancelled_turn(h, Cut([]))
    assert [m.role for m in await h.messages(cid)] == ["user"]
    assert "text.discarded" not in h.bus.types()


async def test_a_call_failing_after_deltas_says_to_drop_them_before_the_error() -> None:
    h = Harness()
    cut = Cut([TextDelta("Half an "), TextDelta("answer")], ProviderUnavailable("down"))
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "hi", model=cut)
    assert result.stop_reason == "failed"
    assert frames_after(h, "text.delta") == [
        "text.delta",
        "text.delta",
        "text.discarded",
        "error",
        "turn.finished",
    ]
    (discarded,) = [f for f in h.bus.frames if isinstance(f, TextDiscarded)]
    assert discarded.reason == "failed"
    assert [m.role for m in await h.messages(cid)] == ["user"]  # the text is not stored
    (turn,) = await h.store.list_turns(cid)
    assert turn.stop_reason == "failed" and turn.error and "down" in turn.error


async def test_a_call_failing_before_any_delta_sends_no_discard() -> None:
    h = Harness(error_step(ProviderUnavailable("down")))
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "hi")).stop_reason == "failed"
    assert "text.discarded" not in h.bus.types()


async def test_a_retry_discards_what_the_failed_attempt_showed() -> None:
    h = Harness(
        Step(
            (
                TextDelta("Parti"),
                Retrying(1, 0.0, "overloaded"),
                TextDelta("The whole "),
                TextDelta("answer."),
                Usage(5, 5),
                Stop("end_turn"),
            )
        )
    )
    cid = await h.conversation()
    await h.runtime.run_turn(cid, "hi")
    assert frames_after(h, "text.delta")[:3] == ["text.delta", "text.discarded", "model.retrying"]
    # What streamed since the discard is exactly the stored row.
    after = h.bus.frames[h.bus.types().index("text.discarded") + 1 :]
    streamed = "".join(getattr(f, "text", "") for f in after if f.type == "text.delta")
    assert (await h.messages(cid))[-1].text == streamed == "The whole answer."


async def test_a_repetition_stop_whose_wrap_up_fails_stores_a_fixed_sentence() -> None:
    call = ("calculator", {"expression": "1+1"})
    h = Harness(
        tool_step(call), tool_step(call), tool_step(call), error_step(ProviderUnavailable("x"))
    )
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "loop")
    assert result.stop_reason == "crashed" and result.error is None
    rows = await h.messages(cid)
    assert rows[-1].role == "assistant" and rows[-1].text == WRAP_UP_FALLBACK["crashed"]
    assert rows[-1].metadata["stop_reason"] == "crashed"
    assert "provider_unavailable" in rows[-1].metadata["wrap_up_error"]
    assert_history_valid(rows)


async def test_a_budget_stop_whose_wrap_up_fails_stores_a_fixed_sentence() -> None:
    h = Harness(
        tool_step(("calculator", {"expression": "1"})),
        error_step(ProviderUnavailable("x")),
        max_model_calls=1,
    )
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "count")
    assert result.stop_reason == "budget_exhausted"
    rows = await h.messages(cid)
    assert rows[-1].text == WRAP_UP_FALLBACK["budget_exhausted"]
