"""Every write op and every read, on every engine (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from ostinato.errors import NotFound, StoreError
from ostinato.ids import new_id
from ostinato.messages import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    user_text,
)
from ostinato.store import MemoryStore, Store
from ostinato.store.base import (
    AppendMessage,
    Conversation,
    CreateConversation,
    FinishToolCall,
    FinishTurn,
    SetConversationState,
    StartToolCall,
    StartTurn,
    ToolCallRecord,
    Turn,
    append,
    utcnow,
)


def conversation(owner: str | None = "ann", **kw: Any) -> Conversation:
    now = utcnow()
    return Conversation(
        id=new_id(), state="idle", created_at=now, updated_at=now, owner=owner, **kw
    )


def turn(conversation_id: str) -> Turn:
    return Turn(
        id=new_id(),
        conversation_id=conversation_id,
        run_id=new_id(),
        status="running",
        started_at=utcnow(),
    )


def tool_call(conversation_id: str, turn_id: str, name: str = "search") -> ToolCallRecord:
    return ToolCallRecord(
        id=f"toolu_{new_id()}",
        conversation_id=conversation_id,
        turn_id=turn_id,
        name=name,
        input={"q": "café", "n": 3},
        status="running",
        started_at=utcnow(),
    )


async def new_conversation(store: Store, **kw: Any) -> Conversation:
    conv = conversation(**kw)
    await store.write(CreateConversation(conv))
    return conv


def assert_utc(value: datetime | None) -> None:
    assert value is not None
    assert value.tzinfo is not None and value.utcoffset() == timedelta(0)


async def test_create_and_get_conversation(store: Store) -> None:
    conv = conversation(persona="tutor", title="Fractions", metadata={"tags": ["a", "ü"]})
    assert await store.write(CreateConversation(conv)) == [None]
    got = await store.get_conversation(conv.id)
    assert got == conv
    assert_utc(got.created_at)
    assert await store.get_conversation("nope") is None


async def test_create_conversation_twice_is_an_error(store: Store) -> None:
    conv = await new_conversation(store)
    with pytest.raises(StoreError, match="exists"):
        await store.write(CreateConversation(conv))


async def test_set_conversation_state(store: Store) -> None:
    conv = await new_conversation(store)
    await store.write(SetConversationState(conv.id, "running"))
    got = await store.get_conversation(conv.id)
    assert got is not None and got.state == "running"
    assert got.updated_at >= conv.updated_at
    assert_utc(got.updated_at)
    with pytest.raises(NotFound):
        await store.write(SetConversationState("nope", "idle"))


async def test_append_allocates_seq_id_and_time(store: Store) -> None:
    conv = await new_conversation(store)
    t = turn(conv.id)
    await store.write(StartTurn(t))
    first = await append(store, conv.id, user_text("hello", source="test"), t.id)
    second = await append(store, conv.id, Message("assistant", (TextBlock("hi"),)))
    assert (first.seq, second.seq) == (1, 2)
    assert first.id and second.id and first.id != second.id
    assert first.turn_id == t.id and second.turn_id is None
    assert_utc(first.created_at)
    assert first.metadata == {"source": "test"}
    assert await store.list_messages(conv.id) == [first, second]
    after = await store.get_conversation(conv.id)
    assert after is not None and after.updated_at >= conv.updated_at


async def test_append_keeps_a_given_id_and_every_block_kind(store: Store) -> None:
    conv = await new_conversation(store)
    blocks = (
        ThinkingBlock("hmm", signature="sig", provider_data={"id": "rs_1"}),
        TextBlock("look", provider_data={"item": 1}),
        ToolUseBlock("tu_1", "search", {"q": "x", "deep": {"a": [1, None]}}),
        ImageBlock("image/png", data="aGk="),
    )
    result = ToolResultBlock(
        "tu_1", (TextBlock("found"), ImageBlock("image/png", url="http://x/y"))
    )
    stored = await append(store, conv.id, Message("assistant", blocks, id="msg-given"))
    tool = await append(store, conv.id, Message("tool", (result,), hidden=True))
    assert stored.id == "msg-given"
    assert await store.list_messages(conv.id) == [stored, tool]


async def test_append_to_unknown_conversation(store: Store) -> None:
    with pytest.raises(NotFound):
        await append(store, "nope", user_text("x"))


async def test_list_messages_after_limit_hidden(store: Store) -> None:
    conv = await new_conversation(store)
    for i in range(6):
        await append(store, conv.id, Message("user", (TextBlock(str(i)),), hidden=i % 2 == 1))
    texts = [m.text for m in await store.list_messages(conv.id, after_seq=2)]
    assert texts == ["2", "3", "4", "5"]
    assert [m.seq for m in await store.list_messages(conv.id, after_seq=1, limit=2)] == [2, 3]
    visible = await store.list_messages(conv.id, include_hidden=False)
    assert [m.text for m in visible] == ["0", "2", "4"]
    assert [m.seq for m in await store.list_messages(conv.id, include_hidden=False, limit=1)] == [1]
    assert await store.list_messages("nope") == []


async def test_turn_lifecycle(store: Store) -> None:
    conv = await new_conversation(store)
    t = turn(conv.id)
    await store.write(StartTurn(t), SetConversationState(conv.id, "running"))
    assert await store.get_turn(t.id) == t
    assert t.id in [r.id for r in await store.running_turns()]
    finished_at = utcnow()
    await store.write(
        FinishTurn(t.id, conv.id, "paused", finished_at, metrics={"steps": 2}, error=None)
    )
    got = await store.get_turn(t.id)
    assert got is not None
    assert (got.status, got.stop_reason, got.metrics) == ("finished", "paused", {"steps": 2})
    assert got.finished_at == finished_at
    assert_utc(got.finished_at)
    assert t.id not in [r.id for r in await store.running_turns()]
    after = await store.get_conversation(conv.id)
    assert after is not None and after.state == "paused"  # STATE_AFTER["paused"]


async def test_finish_turn_failed_moves_conversation_to_failed(store: Store) -> None:
    conv = await new_conversation(store)
    t = turn(conv.id)
    await store.write(StartTurn(t))
    await store.write(FinishTurn(t.id, conv.id, "failed", utcnow(), error="boom"))
    got = await store.get_turn(t.id)
    assert got is not None and got.error == "boom"
    after = await store.get_conversation(conv.id)
    assert after is not None and after.state == "failed"


async def test_turn_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.write(StartTurn(turn("nope")))
    with pytest.raises(NotFound):
        await store.write(FinishTurn("nope", "nope", "end_turn", utcnow()))
    assert await store.get_turn("nope") is None


async def test_list_turns_in_start_order(store: Store) -> None:
    conv = await new_conversation(store)
    other = await new_conversation(store)
    base = utcnow()
    turns = [
        Turn(new_id(), conv.id, new_id(), "running", base + timedelta(seconds=i), kind=k)
        for i, k in enumerate(["user", "resume", "scheduled"])
    ]
    for t in turns:
        await store.write(StartTurn(t))
    await store.write(StartTurn(turn(other.id)))
    assert await store.list_turns(conv.id) == turns


async def test_tool_call_lifecycle(store: Store) -> None:
    conv = await new_conversation(store)
    t = turn(conv.id)
    await store.write(StartTurn(t))
    rec = tool_call(conv.id, t.id)
    await store.write(StartToolCall(rec))
    assert await store.list_tool_calls(conv.id) == [rec]
    done = utcnow()
    await store.write(FinishToolCall(rec.turn_id, rec.id, "error", "no results", True, done, 0.25))
    (got,) = await store.list_tool_calls(conv.id, turn_id=t.id)
    assert (got.status, got.result, got.is_error, got.duration_s) == (
        "error",
        "no results",
        True,
        0.25,
    )
    assert got.finished_at == done
    assert got.input == {"q": "café", "n": 3}
    assert await store.list_tool_calls(conv.id, turn_id="other") == []


async def test_a_tool_result_with_a_nul_is_stored(store: Store) -> None:
    # PostgreSQL text cannot hold NUL: a result carrying one (a file's bytes) is kept
    conv = await new_conversation(store)
    t = turn(conv.id)
    await store.write(StartTurn(t))
    rec = tool_call(conv.id, t.id)
    await store.write(StartToolCall(rec))
    await store.write(FinishToolCall(t.id, rec.id, "ok", "a\x00b", False, utcnow(), 0.1))
    (got,) = await store.list_tool_calls(conv.id)
    assert got.result in ("a\x00b", "a\ufffdb")


async def test_tool_call_errors(store: Store) -> None:
    conv = await new_conversation(store)
    rec = tool_call(conv.id, "t1")
    await store.write(StartToolCall(rec))
    with pytest.raises(StoreError, match="already recorded"):
        await store.write(StartToolCall(rec))
    with pytest.raises(NotFound):
        await store.write(FinishToolCall("t1", "nope", "ok", "x", False, utcnow(), 0.1))
    with pytest.raises(NotFound):
        await store.write(FinishToolCall("t2", rec.id, "ok", "x", False, utcnow(), 0.1))


async def test_a_tool_use_id_may_repeat_in_another_turn(store: Store) -> None:
    conv = await new_conversation(store)
    first = tool_call(conv.id, "t1")
    again = ToolCallRecord(**{**{f: getattr(first, f) for f in first.__slots__}, "turn_id": "t2"})
    await store.write(StartToolCall(first), StartToolCall(again))
    await store.write(FinishToolCall("t2", again.id, "ok", "second", False, utcnow(), 0.1))
    by_turn = {r.turn_id: r for r in await store.list_tool_calls(conv.id)}
    assert (by_turn["t1"].status, by_turn["t2"].result) == ("running", "second")


async def test_list_tool_calls_by_turn(store: Store) -> None:
    conv = await new_conversation(store)
    t1, t2 = turn(conv.id), turn(conv.id)
    a, b, c = (
        tool_call(conv.id, t1.id, "a"),
        tool_call(conv.id, t1.id, "b"),
        tool_call(conv.id, t2.id, "c"),
    )
    await store.write(
        StartTurn(t1), StartTurn(t2), StartToolCall(a), StartToolCall(b), StartToolCall(c)
    )
    assert [r.name for r in await store.list_tool_calls(conv.id, turn_id=t1.id)] == ["a", "b"]
    assert [r.name for r in await store.list_tool_calls(conv.id)] == ["a", "b", "c"]


async def test_list_conversations_newest_first_with_paging(store: Store) -> None:
    owner = f"owner-{new_id()}"
    made = [await new_conversation(store, owner=owner) for _ in range(5)]
    await new_conversation(store, owner="someone-else")
    newest_first = sorted((c.id for c in made), reverse=True)
    page1 = await store.list_conversations(owner=owner, limit=2)
    assert [c.id for c in page1] == newest_first[:2]
    page2 = await store.list_conversations(owner=owner, limit=2, before=page1[-1].id)
    assert [c.id for c in page2] == newest_first[2:4]
    everyone = await store.list_conversations(limit=100)
    assert len(everyone) == 6
    assert [c.id for c in everyone] == sorted((c.id for c in everyone), reverse=True)
    paged = await store.list_conversations(limit=100, before=newest_first[0])
    assert [c.id for c in paged] == [c.id for c in everyone if c.id < newest_first[0]]


async def test_one_write_returns_one_result_per_op(store: Store) -> None:
    conv = conversation()
    t = turn(conv.id)
    rec = tool_call(conv.id, t.id)
    results = await store.write(
        CreateConversation(conv),
        StartTurn(t),
        AppendMessage(conv.id, user_text("a"), t.id),
        StartToolCall(rec),
        AppendMessage(conv.id, user_text("b"), t.id),
        FinishToolCall(rec.turn_id, rec.id, "ok", "done", False, utcnow(), 0.01),
        FinishTurn(t.id, conv.id, "end_turn", utcnow()),
    )
    assert results[:2] == [None, None] and results[3] is None and results[5:] == [None, None]
    assert [results[2].seq, results[4].seq] == [1, 2]
    assert await store.list_messages(conv.id) == [results[2], results[4]]
    assert await store.write() == []


async def test_a_failing_op_undoes_the_whole_write(store: Store) -> None:
    conv = await new_conversation(store)
    fresh = conversation()
    with pytest.raises(NotFound):
        await store.write(
            CreateConversation(fresh),
            AppendMessage(conv.id, user_text("lost")),
            FinishToolCall("t1", "nope", "ok", "x", False, utcnow(), 0.1),
        )
    assert await store.get_conversation(fresh.id) is None
    assert await store.list_messages(conv.id) == []
    # The conversation's seq was not consumed either.
    assert (await append(store, conv.id, user_text("kept"))).seq == 1


async def test_naive_and_offset_times_come_back_as_utc(store: Store) -> None:
    conv = await new_conversation(store)
    started = datetime(2026, 1, 2, 3, 4, 5, 600000)  # naive: taken as UTC
    t = Turn(new_id(), conv.id, new_id(), "running", started)
    await store.write(StartTurn(t))
    two_hours_east = timezone(timedelta(hours=2))
    finished = datetime(2026, 1, 2, 5, 4, 5, tzinfo=two_hours_east)
    await store.write(FinishTurn(t.id, conv.id, "end_turn", finished))
    got = await store.get_turn(t.id)
    assert got is not None
    assert got.finished_at == finished
    if not isinstance(store, MemoryStore):  # the memory store keeps what it was given
        assert got.started_at == started.replace(tzinfo=UTC)
        assert_utc(got.started_at)
        assert_utc(got.finished_at)
