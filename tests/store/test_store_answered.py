"""One result per tool call, as a fact of the store (issue 24): on every engine a second
result for a call is refused whole (``AlreadyAnswered``), however the writes race, and
``write_answers`` turns that refusal into a lost race the writer lives with."""

from __future__ import annotations

import asyncio

import pytest

from ostinato.errors import AlreadyAnswered, NotFound
from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, user_text
from ostinato.store import Store
from ostinato.store.answered import call_turns, write_answers
from ostinato.store.base import (
    AppendMessage,
    Conversation,
    CreateConversation,
    FinishToolCall,
    StartToolCall,
    StartTurn,
    ToolCallRecord,
    Turn,
    utcnow,
)


async def _conversation(store: Store) -> str:
    now = utcnow()
    cid = new_id()
    await store.write(CreateConversation(Conversation(cid, "idle", now, now)))
    return cid


async def _turn_with_calls(store: Store, cid: str, *calls: str) -> str:
    """A turn whose assistant row makes ``calls`` (each started as a record)."""
    turn = Turn(new_id(), cid, new_id(), "running", utcnow())
    uses = tuple(ToolUseBlock(call, "clock", {}) for call in calls)
    records = [
        StartToolCall(ToolCallRecord(call, cid, turn.id, "clock", {}, "running", utcnow()))
        for call in calls
    ]
    await store.write(
        StartTurn(turn),
        AppendMessage(cid, user_text("go"), turn.id),
        AppendMessage(cid, Message("assistant", uses), turn.id),
        *records,
    )
    return turn.id


def _results(*calls: str, text: str = "done") -> Message:
    return Message("tool", tuple(ToolResultBlock(call, text) for call in calls))


def _answers(rows: list[Message]) -> list[tuple[str, str]]:
    return [(r.tool_use_id, r.text) for m in rows for r in m.tool_results]


async def test_a_second_result_for_a_call_is_refused_and_nothing_of_its_write_is_kept(
    store: Store,
) -> None:
    cid = await _conversation(store)
    turn = await _turn_with_calls(store, cid, "a", "b")
    await store.write(AppendMessage(cid, _results("a", text="first"), turn))
    before = await store.list_messages(cid)

    with pytest.raises(AlreadyAnswered) as refused:
        await store.write(
            AppendMessage(cid, user_text("rides along"), turn),
            AppendMessage(cid, _results("b", "a", text="second"), turn),
        )
    assert refused.value.calls == {"a"}
    assert refused.value.status == 409  # a Conflict, for a request that caused it
    assert await store.list_messages(cid) == before  # neither row, no seq taken

    (stored,) = await store.write(AppendMessage(cid, _results("b"), turn))
    assert stored.seq == before[-1].seq + 1
    assert _answers(await store.list_messages(cid)) == [("a", "first"), ("b", "done")]


async def test_one_row_cannot_answer_a_call_twice(store: Store) -> None:
    cid = await _conversation(store)
    turn = await _turn_with_calls(store, cid, "a")
    with pytest.raises(AlreadyAnswered) as refused:
        await store.write(AppendMessage(cid, _results("a", "a"), turn))
    assert refused.value.calls == {"a"}
    assert _answers(await store.list_messages(cid)) == []


async def test_a_call_is_its_turn_and_its_id(store: Store) -> None:
    """Two turns may use one tool_use id (some servers number calls from zero): each
    call has its own result. A row of another turn answers a call through
    ``call_turns`` and meets the same key."""
    cid = await _conversation(store)
    first = await _turn_with_calls(store, cid, "call_0")
    await store.write(AppendMessage(cid, _results("call_0"), first))
    second = await _turn_with_calls(store, cid, "call_0")
    await store.write(AppendMessage(cid, _results("call_0"), second))

    later = new_id()
    with pytest.raises(AlreadyAnswered):
        await store.write(AppendMessage(cid, _results("call_0"), later, {"call_0": first}))
    other = await _conversation(store)  # and another conversation is another call
    await store.write(AppendMessage(other, _results("call_0"), first))


async def test_results_for_an_unknown_conversation_are_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.write(AppendMessage(new_id(), _results("a"), new_id()))


async def test_of_many_writers_racing_to_answer_one_call_exactly_one_wins(store: Store) -> None:
    cid = await _conversation(store)
    turn = await _turn_with_calls(store, cid, "a")
    writes = [
        store.write(AppendMessage(cid, _results("a", text=f"writer {i}"), turn)) for i in range(12)
    ]
    outcomes = await asyncio.gather(*writes, return_exceptions=True)
    won = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len(won) == 1
    assert all(isinstance(o, AlreadyAnswered) for o in outcomes if o not in won)
    assert len(_answers(await store.list_messages(cid))) == 1


async def test_write_answers_leaves_out_what_was_answered_first(store: Store) -> None:
    """The loser of a race writes the rest: the results of calls still open, and the
    ops that are not results; not the finishes of the records the winner closed."""
    cid = await _conversation(store)
    turn = await _turn_with_calls(store, cid, "a", "b", "c")
    await store.write(
        AppendMessage(cid, _results("a", text="real"), turn),
        FinishToolCall(turn, "a", "ok", "real", False, utcnow(), 0.1),
    )
    late = Message("tool", (*_results("a", "b", text="interrupted").blocks, TextBlock("note")))
    written = await write_answers(
        store,
        AppendMessage(cid, _results("a", text="interrupted"), turn),
        AppendMessage(cid, late, turn),
        FinishToolCall(turn, "a", "interrupted", "interrupted", True, utcnow(), 0.0),
        FinishToolCall(turn, "b", "interrupted", "interrupted", True, utcnow(), 0.0),
    )
    assert written.lost == {"a"}
    left_out, stored, *finishes = written.results
    assert left_out is None
    assert isinstance(stored, Message)
    assert [b.tool_use_id for b in stored.tool_results] == ["b"] and stored.text == "note"
    assert finishes == [None, None]  # a's finish left out; b's written (no result value)
    records = {r.id: r.status for r in await store.list_tool_calls(cid)}
    assert records == {"a": "ok", "b": "interrupted", "c": "running"}
    assert _answers(await store.list_messages(cid)) == [("a", "real"), ("b", "interrupted")]

    nothing = await write_answers(store, AppendMessage(cid, _results("a", "b"), turn))
    assert nothing.results == [None] and nothing.lost == {"a", "b"}


def test_call_turns_names_the_turn_of_each_call_made_elsewhere() -> None:
    rows = [
        Message("assistant", (ToolUseBlock("x", "clock", {}),), turn_id="t1"),
        Message("assistant", (ToolUseBlock("y", "clock", {}),), turn_id="t2"),
        Message("assistant", (ToolUseBlock("x", "clock", {}),), turn_id="t3"),
    ]
    assert call_turns(rows, ["x", "y"], "t2") == {"x": "t3"}
    assert call_turns(rows, ["y"], None) == {"y": "t2"}
    assert call_turns(rows, ["z"], "t1") == {}
