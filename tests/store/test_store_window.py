"""The history window read and the summary watermark, on every engine; and that the
SQL window reads O(limit) rows whatever the conversation's length."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from ostinato.errors import NotFound
from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock, user_text
from ostinato.store import PostgresStore, SQLiteStore, Store
from ostinato.store.base import (
    AppendMessage,
    AppendSummary,
    Conversation,
    CreateConversation,
    utcnow,
)
from ostinato.store.branches import HistoryWindow, MoveBranch
from ostinato.store.sql import tree_sql
from ostinato.store.sql.sqlite_sql import compile_sqlite
from ostinato.store.tree import SEQ_END


async def new_conversation(store: Store, rows: int = 0) -> str:
    now = utcnow()
    cid = new_id()
    ops: list[Any] = [CreateConversation(Conversation(cid, "idle", now, now, owner="ann"))]
    ops += [AppendMessage(cid, user_text(f"m{i + 1}")) for i in range(rows)]
    await store.write(*ops)
    return cid


def summary(text: str, through: int) -> Message:
    return Message(
        "system",
        (TextBlock(text),),
        hidden=True,
        metadata={"kind": "summary", "through_seq": through},
    )


def seqs(rows: list[Message]) -> list[int]:
    return [m.seq or 0 for m in rows]


async def test_an_empty_or_unknown_conversation_has_an_empty_window(store: Store) -> None:
    cid = await new_conversation(store)
    for conversation_id in (cid, "unknown"):
        window = await store.window(conversation_id, limit=10)
        assert (window.summary, window.rows, window.more) == (None, [], False)


async def test_the_window_is_the_newest_rows_oldest_first(store: Store) -> None:
    cid = await new_conversation(store, 10)
    window = await store.window(cid, limit=4)
    assert seqs(window.rows) == [7, 8, 9, 10] and window.more
    assert [m.text for m in window.rows] == ["m7", "m8", "m9", "m10"]
    whole = await store.window(cid, limit=10)
    assert seqs(whole.rows) == list(range(1, 11)) and not whole.more
    assert (await store.window(cid, limit=0)).more


async def test_a_turn_reads_the_conversation_with_its_window(store: Store) -> None:
    assert await store.conversation_and_window("unknown", limit=5) == (
        None,
        HistoryWindow(None, [], False),
    )
    cid = await new_conversation(store, 8)
    await store.write(AppendSummary(cid, summary("s", 3), through_seq=3))
    await store.write(AppendMessage(cid, user_text("m10")))
    for limit in (0, 3, 20):
        found, window = await store.conversation_and_window(cid, limit=limit)
        assert found == await store.get_conversation(cid)
        assert window == await store.window(cid, limit=limit)
    (branch,) = await store.write(MoveBranch(cid, 5))  # branched: its ranges read after
    await store.write(AppendMessage(cid, user_text("m11")))
    found, window = await store.conversation_and_window(cid, limit=20)
    assert found is not None and found.branch == branch
    assert seqs(window.rows) == [4, 5, 11] and window.summary is not None
    assert window == await store.window(cid, limit=20)


async def test_a_summary_becomes_the_watermark(store: Store) -> None:
    cid = await new_conversation(store, 6)
    (stored,) = await store.write(AppendSummary(cid, summary("first four", 4), through_seq=4))
    assert isinstance(stored, Message)
    assert stored.seq == 7 and stored.hidden and stored.role == "system" and stored.id
    await store.write(AppendMessage(cid, user_text("m8")))
    window = await store.window(cid, limit=40)
    assert window.summary == stored
    assert seqs(window.rows) == [5, 6, 8] and not window.more  # never the summary row
    limited = await store.window(cid, limit=2)
    assert seqs(limited.rows) == [6, 8] and limited.more
    # the summary is an ordinary stored row for everything else
    assert seqs(await store.list_messages(cid)) == list(range(1, 9))
    assert seqs(await store.list_messages(cid, include_hidden=False)) == [1, 2, 3, 4, 5, 6, 8]


async def test_the_latest_summary_wins_and_older_summary_rows_stay_out(store: Store) -> None:
    cid = await new_conversation(store, 4)
    await store.write(AppendSummary(cid, summary("one", 2), through_seq=2))  # seq 5
    await store.write(*(AppendMessage(cid, user_text(f"n{i}")) for i in range(3)))  # 6..8
    (latest,) = await store.write(AppendSummary(cid, summary("two", 3), through_seq=3))  # 9
    await store.write(AppendMessage(cid, user_text("last")))  # 10
    window = await store.window(cid, limit=40)
    assert window.summary == latest and latest.text == "two"
    assert seqs(window.rows) == [4, 6, 7, 8, 10]


async def test_a_summary_for_an_unknown_conversation_writes_nothing(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.write(AppendSummary("unknown", summary("x", 1), through_seq=1))
    cid = await new_conversation(store, 2)
    with pytest.raises(NotFound):
        await store.write(
            AppendSummary(cid, summary("x", 1), through_seq=1),
            AppendMessage("unknown", user_text("boom")),
        )
    window = await store.window(cid, limit=10)
    assert window.summary is None and seqs(window.rows) == [1, 2]


# --- O(limit): the window never reads the whole history ---------------------------------


def _sqlite_steps(path: str, cid: str, limit: int) -> tuple[int, int]:
    """(rows returned, SQLite VM instructions run) for the window's rows statement."""
    compiled = compile_sqlite(tree_sql.window_rows())
    conn = sqlite3.connect(path)
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn.set_progress_handler(count, 1)
    try:
        params = compiled.defaults | {
            "conversation_id": cid,
            "after_seq": 0,
            "upto": SEQ_END,
            "limit": limit,
        }
        found = conn.execute(compiled.text, params).fetchall()
    finally:
        conn.close()
    return len(found), steps


async def test_sqlite_window_cost_does_not_grow_with_the_history(
    sqlite_store: SQLiteStore,
) -> None:
    short = await new_conversation(sqlite_store, 50)
    long = await new_conversation(sqlite_store, 5_000)
    await sqlite_store.write(AppendSummary(long, summary("s", 10), through_seq=10))
    small = _sqlite_steps(sqlite_store.path, short, 41)
    large = _sqlite_steps(sqlite_store.path, long, 41)
    assert small[0] == large[0] == 41
    assert large[1] <= small[1] * 1.2  # the same walk, not 100x the rows

    conn = sqlite3.connect(sqlite_store.path)
    try:
        compiled = compile_sqlite(tree_sql.window_rows())
        plan = " | ".join(
            row[3]
            for row in conn.execute(
                "EXPLAIN QUERY PLAN " + compiled.text,
                compiled.defaults
                | {"conversation_id": long, "after_seq": 0, "upto": SEQ_END, "limit": 41},
            )
        )
    finally:
        conn.close()
    assert "SEARCH messages USING INDEX" in plan  # the (conversation_id, seq) unique index
    assert "(conversation_id=? AND seq>? AND seq<?)" in plan
    assert "TEMP B-TREE" not in plan  # no sort: the index is walked backwards
    window = await sqlite_store.window(long, limit=40)
    assert seqs(window.rows) == list(range(4_961, 5_001)) and window.more  # not 5001


def _plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    nodes = [plan]
    for child in plan.get("Plans", []):
        nodes += _plan_nodes(child)
    return nodes


async def _postgres_scans(store: PostgresStore, stmt: Any) -> list[dict[str, Any]]:
    """The scans of ``messages`` in ``stmt``'s plan, as run (``EXPLAIN ANALYZE``)."""
    async with store.engine.connect() as conn:
        await conn.execute(sa.text("ANALYZE messages"))
        await conn.execute(sa.text("ANALYZE summaries"))
        text = str(
            stmt.compile(
                dialect=postgresql.dialect(),  # type: ignore[no-untyped-call]
                compile_kwargs={"literal_binds": True},
            )
        )
        result = await conn.execute(sa.text("EXPLAIN (ANALYZE, FORMAT JSON) " + text))
        raw = result.scalar_one()
    plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
    return [n for n in _plan_nodes(plan) if n.get("Relation Name") == "messages"]


async def test_postgres_window_reads_limit_rows_by_index(postgres_store: PostgresStore) -> None:
    long = await new_conversation(postgres_store, 3_000)
    await new_conversation(postgres_store, 500)
    stmt = tree_sql.window_rows().params(conversation_id=long, after_seq=0, upto=SEQ_END, limit=41)
    scans = await _postgres_scans(postgres_store, stmt)
    assert scans and all(n["Node Type"] in ("Index Scan", "Index Only Scan") for n in scans)
    assert all(n["Actual Rows"] <= 41 for n in scans)
    assert scans[0].get("Scan Direction") == "Backward"
    window = await postgres_store.window(long, limit=40)
    assert seqs(window.rows) == list(range(2_961, 3_001)) and window.more


async def test_postgres_reads_a_never_branched_window_in_one_statement_by_index(
    postgres_store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    long = await new_conversation(postgres_store, 3_000)
    await postgres_store.write(AppendSummary(long, summary("s", 10), through_seq=2_990))
    stmt = tree_sql.window_in_one().params(
        conversation_id=long, after_seq=0, upto=SEQ_END, limit=41
    )
    scans = await _postgres_scans(postgres_store, stmt)
    assert scans and all(n["Node Type"] in ("Index Scan", "Index Only Scan") for n in scans)
    assert all(n["Actual Rows"] <= 41 for n in scans)
    assert any(n.get("Scan Direction") == "Backward" for n in scans)
    fetched: list[Any] = []
    fetch = postgres_store._fetch

    async def counted(stmt: Any, params: dict[str, Any]) -> Any:
        fetched.append(stmt)
        return await fetch(stmt, params)

    monkeypatch.setattr(postgres_store, "_fetch", counted)
    window = await postgres_store.window(long, limit=5)
    assert len(fetched) == 1  # the summary and the rows after it: one round trip
    found, same = await postgres_store.conversation_and_window(long, limit=5)
    assert len(fetched) == 2 and same == window  # and the conversation's row with them
    assert found == await postgres_store.get_conversation(long)
    assert window.summary is not None and window.summary.text == "s"
    assert seqs(window.rows) == [2_996, 2_997, 2_998, 2_999, 3_000] and window.more  # (the
    # summary is row 3,001)
