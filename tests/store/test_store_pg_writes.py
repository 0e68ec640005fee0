"""PostgreSQL's write path (issue 16 item 6): a step's write in one statement, the
writes of one pass of the event loop in one round trip, and the ordinary way for what
cannot be planned or was refused (``store.sql.pg_writer``, ``store.sql.speculate``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa

from ostinato.approvals import Ending
from ostinato.errors import NotFound, StoreError
from ostinato.messages import Message, TextBlock, ToolUseBlock, user_text
from ostinato.store import PostgresStore
from ostinato.store.base import (
    AppendMessage,
    CreateConversation,
    DecideApproval,
    StartToolCall,
    StartTurn,
    append,
    utcnow,
)
from ostinato.store.branches import MoveBranch
from ostinato.store.sql.pg_driver import Drivers
from ostinato.store.sql.pg_writer import PostgresWriter
from ostinato.store.sql.postgres import engine_options_of
from ostinato.store.sql.speculate import plan
from tests.store.conftest import open_postgres
from tests.store.test_store_ops import conversation, new_conversation, tool_call, turn


def test_a_steps_ops_are_planned_and_others_are_not() -> None:
    conv = conversation()
    t = turn(conv.id)
    record = tool_call(conv.id, t.id)
    reply = Message("assistant", (ToolUseBlock(record.id, "search", {}),))
    planned = plan((AppendMessage(conv.id, reply, t.id), StartToolCall(record)))
    assert planned is not None
    assert planned.shape == ("insert_message", "insert_tool_call")
    assert plan((CreateConversation(conv),)) is not None  # a new chat: one statement
    assert plan((DecideApproval("a", Ending.APPROVED, utcnow()),)) is None


async def test_a_steps_write_is_one_round_trip(postgres_store: PostgresStore) -> None:
    store = postgres_store
    conv = await new_conversation(store)
    t = turn(conv.id)
    await store.write(StartTurn(t))
    before = store.stats.round_trips
    record = tool_call(conv.id, t.id)
    reply = Message("assistant", (TextBlock("let me"), ToolUseBlock(record.id, "search", {})))
    stored, _ = await store.write(AppendMessage(conv.id, reply, t.id), StartToolCall(record))
    assert store.stats.round_trips == before + 1 and store.stats.redone == 0
    assert stored.seq == 1 and stored.id and stored.blocks == reply.blocks
    assert await store.list_messages(conv.id) == [stored]
    assert [c.id for c in await store.list_tool_calls(conv.id)] == [record.id]


async def test_a_write_of_two_appends_is_one_round_trip(postgres_store: PostgresStore) -> None:
    """A turn's start with a seed call appends two rows to one conversation in one write:
    one statement, whose later append cannot see the earlier one's row (one snapshot),
    so it takes the seq after it (``insert_next_message``). It was refused and redone
    statement by statement on every such turn."""
    store = postgres_store
    conv = await new_conversation(store)
    t = turn(conv.id)
    record = tool_call(conv.id, t.id, "recall")
    seed = Message("assistant", (ToolUseBlock(record.id, "recall", {}),))
    before = store.stats.round_trips
    question, _, reply, _ = await store.write(
        AppendMessage(conv.id, user_text("hi"), t.id),
        StartTurn(t),
        AppendMessage(conv.id, seed, t.id),
        StartToolCall(record),
    )
    assert store.stats.round_trips == before + 1 and store.stats.redone == 0
    assert (question.seq, question.parent_seq, reply.seq, reply.parent_seq) == (1, 0, 2, 1)
    assert await store.list_messages(conv.id) == [question, reply]


async def test_two_appends_after_an_edit_follow_the_new_branch(
    postgres_store: PostgresStore,
) -> None:
    store = postgres_store
    conv = await new_conversation(store)
    for text in ("q1", "a1", "q2", "a2"):
        await append(store, conv.id, user_text(text))
    await store.write(MoveBranch(conv.id, 2))  # edit q2: the next row's parent is a1
    redone = store.stats.redone
    q2b, a2b, a2c = await store.write(
        *(AppendMessage(conv.id, user_text(t)) for t in ("q2 edited", "a2 again", "more"))
    )
    assert store.stats.redone == redone
    assert [(m.seq, m.parent_seq) for m in (q2b, a2b, a2c)] == [(5, 2), (6, 5), (7, 6)]
    assert [m.text for m in await store.list_messages(conv.id)] == [
        "q1",
        "a1",
        "q2 edited",
        "a2 again",
        "more",
    ]


async def test_a_new_conversation_is_one_round_trip(postgres_store: PostgresStore) -> None:
    store = postgres_store
    before = store.stats.round_trips
    titled = conversation(title="Trip to Lyon")
    await store.write(CreateConversation(titled))
    assert store.stats.round_trips == before + 1 and store.stats.redone == 0
    found = await store.get_conversation(titled.id)
    assert found is not None and found.title == "Trip to Lyon" and found.owner == "ann"
    hits = await store.search_messages("lyon", owner="ann")
    assert [(h.conversation_id, h.message_id) for h in hits] == [(titled.id, None)]  # indexed
    with pytest.raises(StoreError, match="exists"):  # refused, redone: the ordinary error
        await store.write(CreateConversation(titled))
    assert store.stats.redone == 1


async def test_concurrent_writes_share_round_trips(postgres_store: PostgresStore) -> None:
    store = postgres_store
    ids = [(await new_conversation(store)).id for _ in range(100)]
    same = ids[0]
    before = store.stats.round_trips
    await asyncio.gather(
        *(append(store, cid, user_text("hi")) for cid in ids),
        *(append(store, same, user_text(f"more {i}")) for i in range(20)),
    )
    assert store.stats.round_trips - before == 1 and store.stats.redone == 0
    assert [m.seq for m in await store.list_messages(same)] == list(range(1, 22))
    for cid in ids[1:]:
        assert [m.text for m in await store.list_messages(cid)] == ["hi"]


async def test_a_group_of_one_is_a_plain_fetch_and_of_more_one_fetchmany(
    postgres_store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = postgres_store
    first, second = [(await new_conversation(store)).id for _ in range(2)]
    methods: list[str] = []
    call = Drivers.call

    async def seen(self: Drivers, method: str, *args: Any, relaxed: bool = False) -> Any:
        methods.append(method)
        return await call(self, method, *args, relaxed=relaxed)

    monkeypatch.setattr(Drivers, "call", seen)
    alone = await append(store, first, user_text("alone"))
    assert methods == ["fetch"] and alone.seq == 1
    both = await asyncio.gather(*(append(store, c, user_text("two")) for c in (first, second)))
    assert methods == ["fetch", "fetchmany"] and [m.seq for m in both] == [2, 1]


async def test_a_refused_group_is_redone_write_by_write(postgres_store: PostgresStore) -> None:
    """One write of a group names no conversation: the group changes nothing, then each
    write is redone alone, so only that one fails, with the ordinary error."""
    store = postgres_store
    ids = [(await new_conversation(store)).id for _ in range(5)]
    outcomes = await asyncio.gather(
        *(append(store, cid, user_text("x")) for cid in [*ids[:2], "nope", *ids[2:]]),
        return_exceptions=True,
    )
    assert isinstance(outcomes[2], NotFound)
    assert all(isinstance(o, Message) and o.seq == 1 for i, o in enumerate(outcomes) if i != 2)
    assert store.stats.redone == 6
    for cid in ids:
        assert len(await store.list_messages(cid)) == 1


async def test_a_seq_taken_meanwhile_is_redone(postgres_store: PostgresStore) -> None:
    """Another transaction holds the next seq, uncommitted: the one statement waits,
    finds it taken and is refused whole; redone, the append takes the seq after it."""
    store = postgres_store
    conv = await new_conversation(store)
    await append(store, conv.id, user_text("first"))
    async with store.engine.connect() as rival:
        await rival.begin()
        await rival.execute(
            sa.text(
                "INSERT INTO messages (id, conversation_id, seq, role, blocks, hidden,"
                " metadata, created_at) VALUES ('m2', :c, 2, 'user', '[]', false, '{}', now())"
            ),
            {"c": conv.id},
        )
        pending = asyncio.create_task(append(store, conv.id, user_text("third")))
        await asyncio.sleep(0.2)
        assert not pending.done()
        await rival.commit()
    assert (await pending).seq == 3
    assert store.stats.redone == 1


async def test_a_lost_connection_fails_the_group_without_redoing(
    postgres_store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether a commit whose answer was lost happened is unknown: not redone (it could
    append twice), the writes fail."""
    store = postgres_store
    conv = await new_conversation(store)

    async def lost(
        self: PostgresWriter, sql: str, args: list[list[object]], **_: object
    ) -> list[object]:
        raise ConnectionResetError("gone")

    monkeypatch.setattr(PostgresWriter, "_fetchmany", lost)
    with pytest.raises(StoreError, match="gone"):
        await append(store, conv.id, user_text("x"))
    assert store.stats.redone == 0
    monkeypatch.undo()
    assert await store.list_messages(conv.id) == []


async def test_an_unknown_conversation_is_not_found(postgres_store: PostgresStore) -> None:
    with pytest.raises(NotFound):
        await append(postgres_store, "nope", user_text("x"))


def test_pool_and_statement_cache_from_the_url() -> None:
    url, options = engine_options_of(
        "postgresql+asyncpg://u@h/db?pool_size=3&max_overflow=0&statement_cache=off&ssl=x"
    )
    assert (options["pool_size"], options["max_overflow"]) == (3, 0)
    assert options["connect_args"]["statement_cache_size"] == 0
    assert options["connect_args"]["prepared_statement_cache_size"] == 0
    names = {options["connect_args"]["prepared_statement_name_func"]() for _ in range(3)}
    assert len(names) == 3
    assert dict(url.query) == {"ssl": "x"}
    _, defaults = engine_options_of("postgresql+asyncpg://u@h/db")
    assert (defaults["pool_size"], defaults["max_overflow"]) == (10, 20)
    assert "connect_args" not in defaults
    for bad in ("pool_size=0", "max_overflow=-1", "pool_size=x", "statement_cache=maybe"):
        with pytest.raises(ValueError):
            engine_options_of(f"postgresql+asyncpg://u@h/db?{bad}")


async def test_a_store_without_statement_caches(postgres_url: sa.URL) -> None:
    """``statement_cache=off`` (for a pooler in transaction mode): writes of either way
    and reads work, and nothing stays prepared on the server connection."""
    url = postgres_url.update_query_dict({"statement_cache": "off", "pool_size": "2"})
    store = await open_postgres(url)
    try:
        conv = await new_conversation(store)
        stored = [await append(store, conv.id, user_text(str(i))) for i in range(3)]
        assert [m.seq for m in stored] == [1, 2, 3]
        assert await store.list_messages(conv.id) == stored
        async with store.engine.connect() as connection:
            found = await connection.execute(sa.text("SELECT name FROM pg_prepared_statements"))
            names = [row[0] for row in found]
        # none of asyncpg's numbered names, which clash on a pooler's shared connections
        assert all(name.startswith("__ostinato_") for name in names), names
    finally:
        await store.close()
