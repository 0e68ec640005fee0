"""Question cards: a ui tool pauses the turn; an answer resumes it; typing dismisses it."""

from __future__ import annotations

import json

import pytest

from ostinato.errors import Conflict
from ostinato.frames import InputRequested
from ostinato.loop.decision import ONE_CARD
from ostinato.models.scripted import text_step, tool_step
from tests.loop.harness import Harness

ASK = ("ask_user", {"question": "Which colour?", "options": ["red", "blue"]}, "card1")


async def paused() -> tuple[Harness, str]:
    h = Harness(tool_step(ASK, text="Let me ask."))
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "paint it")
    assert result.stop_reason == "paused"
    return h, cid


async def test_a_ui_call_pauses_the_turn_with_a_card_that_is_a_row() -> None:
    h, cid = await paused()
    conversation = await h.store.get_conversation(cid)
    assert conversation is not None and conversation.state == "paused"
    rows = await h.store.list_messages(cid)
    assert [m.role for m in rows] == ["user", "assistant"]
    assert rows[1].metadata["awaiting"] == "card1"
    card = next(f for f in h.bus.frames if isinstance(f, InputRequested))
    assert card.tool_use_id == "card1" and card.input["options"] == ["red", "blue"]
    assert h.bus.types()[-2:] == ["input.requested", "turn.finished"]
    (record,) = await h.store.list_tool_calls(cid)
    assert record.status == "waiting"


async def test_answering_the_card_resumes_in_a_new_turn() -> None:
    h, cid = await paused()
    h.model.add(text_step("Blue it is."))
    handle = await h.runtime.answer_card(cid, "card1", {"choice": "blue"})
    assert handle.turn.kind == "resume"
    result = await handle.result()
    assert result.stop_reason == "end_turn"
    rows = await h.messages(cid)
    assert [m.role for m in rows] == ["user", "assistant", "tool", "assistant"]
    assert json.loads(rows[2].tool_results[0].text) == {"choice": "blue"}
    assert h.model.requests[-1].messages[-1].tool_results[0].tool_use_id == "card1"
    (record,) = await h.store.list_tool_calls(cid)
    assert record.status == "ok"
    assert (await h.store.get_conversation(cid)).state == "idle"  # type: ignore[union-attr]


async def test_a_wrong_or_stale_card_id_is_a_conflict() -> None:
    h, cid = await paused()
    with pytest.raises(Conflict, match="not 'nope'"):
        await h.runtime.answer_card(cid, "nope", "x")
    h.model.add(text_step("ok"))
    await (await h.runtime.answer_card(cid, "card1", "red")).result()
    with pytest.raises(Conflict, match="no question card"):
        await h.runtime.answer_card(cid, "card1", "red")  # answered already


async def test_typing_instead_dismisses_the_card_then_runs_the_message() -> None:
    h, cid = await paused()
    h.model.add(text_step("Sure, something else."))
    result = await h.runtime.run_turn(cid, "never mind, do something else")
    assert result.stop_reason == "end_turn"
    rows = await h.messages(cid)
    assert [m.role for m in rows] == ["user", "assistant", "tool", "user", "assistant"]
    dismissal = json.loads(rows[2].tool_results[0].text)
    assert dismissal == {"dismissed": True, "user_message": "never mind, do something else"}
    (record,) = await h.store.list_tool_calls(cid)
    assert record.status == "dismissed"


async def test_other_calls_of_the_step_run_before_the_pause() -> None:
    h = Harness(tool_step(("calculator", {"expression": "1+1"}), ASK), text_step("done"))
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "go")).stop_reason == "paused"
    rows = await h.store.list_messages(cid)
    assert [r.tool_use_id for r in rows[2].tool_results] == ["call_1"]
    await (await h.runtime.answer_card(cid, "card1", "blue")).result()
    rows = await h.messages(cid)  # both calls answered, results in two tool rows
    assert [m.role for m in rows] == ["user", "assistant", "tool", "tool", "assistant"]


async def test_one_card_at_a_time() -> None:
    second = ("ask_user", {"question": "And size?"}, "card2")
    h = Harness(tool_step(ASK, second))
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "go")).stop_reason == "paused"
    rows = await h.store.list_messages(cid)
    assert rows[1].metadata["awaiting"] == "card1"
    assert rows[2].tool_results[0].tool_use_id == "card2"
    assert rows[2].tool_results[0].text == ONE_CARD


async def test_cancel_dismisses_a_waiting_card() -> None:
    h, cid = await paused()
    outcome = await h.runtime.cancel(cid)
    assert outcome.cancelled_turn is None and outcome.dismissed == ("card1",)
    rows = await h.messages(cid)
    assert json.loads(rows[-1].tool_results[0].text) == {"dismissed": True}
    assert (await h.store.get_conversation(cid)).state == "idle"  # type: ignore[union-attr]
    with pytest.raises(Conflict):
        await h.runtime.cancel(cid)


@pytest.mark.parametrize(
    "arguments",
    [{"options": ["red"]}, {"question": "Which?", "options": "red"}, {"question": 7}],
    ids=["no question", "options not a list", "question not text"],
)
async def test_a_card_with_arguments_that_do_not_fit_is_an_error_not_a_pause(
    arguments: dict[str, object],
) -> None:
    h = Harness(tool_step(("ask_user", arguments, "bad")), text_step("Let me ask properly."))
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "paint it")
    assert result.stop_reason == "end_turn"  # no card waits for a person
    assert not any(isinstance(f, InputRequested) for f in h.bus.frames)
    rows = await h.messages(cid)
    assert [m.role for m in rows] == ["user", "assistant", "tool", "assistant"]
    assert "awaiting" not in rows[1].metadata
    seen = h.model.requests[-1].messages[-1].tool_results[0]
    assert seen.tool_use_id == "bad" and seen.is_error
    (record,) = await h.store.list_tool_calls(cid)
    assert record.status == "error"
    assert (await h.store.get_conversation(cid)).state == "idle"  # type: ignore[union-attr]


async def test_a_fitting_card_after_an_unfit_one_still_pauses() -> None:
    h = Harness(tool_step(("ask_user", {}, "bad")), tool_step(ASK))
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "paint it")).stop_reason == "paused"
    rows = await h.store.list_messages(cid)
    assert rows[-1].metadata["awaiting"] == "card1"
