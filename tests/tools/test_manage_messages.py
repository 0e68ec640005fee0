"""manage_messages in real turns (scripted model, real stores): stats without asking;
hide, show and compact ask first and apply from the next turn; the originals are never
deleted; a range is widened to whole turns; the running turn is never touched."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from ostinato.approvals import ApprovalPolicy
from ostinato.context.compaction import SUMMARY_HEADER, Compactor
from ostinato.errors import ClientError
from ostinato.models.base import ModelRequest
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.store import MemoryStore
from ostinato.store.base import Store
from ostinato.store.sql.sqlite import SQLiteStore
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.manage import PROTECTED
from ostinato.tools.messages_tool import manage_messages_tool
from ostinato.tools.registry import ToolRegistry

NO_ASKING = ApprovalPolicy(ask_for=frozenset())


@pytest_asyncio.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    made: Store = (
        MemoryStore() if request.param == "memory" else await SQLiteStore.open(tmp_path / "s.db")
    )
    yield made
    await made.close()


def runtime(
    store: Store, model: ScriptedModel, policy: ApprovalPolicy | None = None, **kw: Any
) -> Runtime:
    tools = ToolRegistry([*builtin_tools(), manage_messages_tool()])
    return Runtime(store, model=model, tools=tools, approvals=policy, **kw)


async def call(rt: Runtime, model: ScriptedModel, cid: str, arguments: dict[str, Any]) -> Any:
    model.add(tool_step(("manage_messages", arguments)), text_step("done"))
    await rt.run_turn(cid, f"manage_messages {arguments}")
    (record,) = [c for c in await rt.store.list_tool_calls(cid) if c.name == "manage_messages"][-1:]
    return record


def said(request: ModelRequest) -> str:
    return repr([m.blocks for m in request.messages])


async def chat(rt: Runtime, model: ScriptedModel, cid: str, *lines: str) -> None:
    for line in lines:
        model.add(text_step(f"ok: {line}"))
        await rt.run_turn(cid, line)


async def test_stats_runs_without_asking_and_lists_earlier_turns(store: Store) -> None:
    model = ScriptedModel()
    rt = runtime(store, model)  # the default policy asks before write: stats does not
    try:
        conversation = await rt.create_conversation(owner="ann")
        await chat(rt, model, conversation.id, "alpha apples", "beta bananas")
        record = await call(rt, model, conversation.id, {"action": "stats"})
        assert record.status == "ok", record.result
        stats = json.loads(record.result)
        assert stats["rows"] == 6  # two turns of two rows, this turn's message and call
        assert stats["shown_in_chat"] == 6 and stats["oldest"] is not None
        assert stats["tokens_sent"] > 0 and stats["tokens_stored"] >= stats["tokens_sent"]
        turns = stats["earlier_turns"]
        assert [t["starts"] for t in turns] == ["alpha apples", "beta bananas"]
        assert [(t["from_seq"], t["through_seq"]) for t in turns] == [(1, 2), (3, 4)]
        assert "manage_messages" in PROTECTED and "manage_messages" in rt.protected_tools
        with pytest.raises(ClientError):
            await rt.switch_tool("ann", "manage_messages", enabled=False)
    finally:
        await rt.close()


async def test_hiding_asks_first_and_with_no_one_to_ask_nothing_changes(store: Store) -> None:
    model = ScriptedModel()
    rt = runtime(store, model)
    try:
        conversation = await rt.create_conversation(owner="ann")
        await chat(rt, model, conversation.id, "alpha apples")
        record = await call(
            rt, model, conversation.id, {"action": "hide", "from_seq": 1, "through_seq": 2}
        )
        assert record.status == "refused" and "approval" in (record.result or "")
        rows = await rt.store.list_messages(conversation.id)
        assert not any("left_out" in r.metadata for r in rows)
    finally:
        await rt.close()


async def test_hide_widens_to_whole_turns_keeps_the_rows_and_show_brings_them_back(
    store: Store,
) -> None:
    model = ScriptedModel()
    rt = runtime(store, model, NO_ASKING)
    try:
        cid = (await rt.create_conversation(owner="ann")).id
        await chat(rt, model, cid, "alpha apples", "beta bananas")
        record = await call(rt, model, cid, {"action": "hide", "from_seq": 2, "through_seq": 2})
        assert json.loads(record.result)["hidden_from_model"] == {
            "from_seq": 1,
            "through_seq": 2,
            "rows": 2,
        }
        await chat(rt, model, cid, "what now?")
        assert "alpha apples" not in said(model.requests[-1])
        assert "beta bananas" in said(model.requests[-1])
        rows = await rt.store.list_messages(cid)
        assert [r.text for r in rows[:2]] == ["alpha apples", "ok: alpha apples"]
        assert all(r.metadata.get("left_out") for r in rows[:2])

        await call(rt, model, cid, {"action": "show", "from_seq": 1, "through_seq": 1})
        await chat(rt, model, cid, "and now?")
        assert "alpha apples" in said(model.requests[-1])
        bad = await call(rt, model, cid, {"action": "hide", "from_seq": 900, "through_seq": 901})
        assert bad.status == "error" and "no earlier turn" in (bad.result or "")
    finally:
        await rt.close()


async def test_compact_summarises_the_start_folds_the_originals_and_keeps_them(
    store: Store,
) -> None:
    model = ScriptedModel()
    summariser = ScriptedModel([text_step("Ann likes apples and bananas.")])
    rt = runtime(store, model, NO_ASKING, compactor=Compactor(summariser))
    try:
        cid = (await rt.create_conversation(owner="ann")).id
        await chat(rt, model, cid, "alpha apples", "beta bananas", "gamma grapes")
        record = await call(rt, model, cid, {"action": "compact", "through_seq": 3})
        assert record.status == "ok", record.result
        result = json.loads(record.result)
        assert result["compacted"] == {"from_seq": 1, "through_seq": 4, "rows": 4}
        transcript = said(summariser.requests[0])
        assert "alpha apples" in transcript and "beta bananas" in transcript
        assert "gamma grapes" not in transcript

        await chat(rt, model, cid, "what do I like?")
        sent = model.requests[-1]
        assert sent.messages[0].text.startswith(SUMMARY_HEADER)
        assert "Ann likes apples and bananas." in said(sent)
        assert "alpha apples" not in said(sent) and "gamma grapes" in said(sent)
        rows = await rt.store.list_messages(cid)
        assert [r.text for r in rows[:4]] == [
            "alpha apples",
            "ok: alpha apples",
            "beta bananas",
            "ok: beta bananas",
        ]
        assert [r.metadata.get("folded") for r in rows[:5]] == [4, 4, 4, 4, None]
        stats = json.loads((await call(rt, model, cid, {"action": "stats"})).result)
        assert stats["summary_through_seq"] == 4 and stats["folded"] == 4
        assert stats["earlier_turns"][0]["starts"] == "gamma grapes"
    finally:
        await rt.close()


async def test_metadata_of_a_row_that_is_not_there_is_not_found(store: Store) -> None:
    from ostinato.errors import NotFound
    from ostinato.store.base import SetMessageMetadata

    model = ScriptedModel()
    rt = runtime(store, model)
    try:
        cid = (await rt.create_conversation(owner="ann")).id
        with pytest.raises(NotFound):
            await rt.store.write(SetMessageMetadata(cid, 7, {"left_out": True}))
    finally:
        await rt.close()


async def test_another_process_s_cache_sees_the_changed_metadata(tmp_path: Path) -> None:
    """Two stores on one SQLite file stand for two servers: the reader's decoded-row
    cache does not keep the metadata it read before the other one changed it."""
    from ostinato.messages import Message, TextBlock
    from ostinato.store.base import AppendMessage, SetMessageMetadata

    writer = await SQLiteStore.open(tmp_path / "s.db")
    reader = await SQLiteStore.open(tmp_path / "s.db")
    try:
        rt = runtime(writer, ScriptedModel())
        conversation = await rt.create_conversation(owner="ann")
        await writer.write(AppendMessage(conversation.id, Message("user", (TextBlock("hi"),))))
        (row,) = (await reader.window(conversation.id, limit=10)).rows
        assert row.metadata == {}
        await writer.write(SetMessageMetadata(conversation.id, 1, {"left_out": True}))
        (row,) = (await reader.window(conversation.id, limit=10)).rows
        assert row.metadata == {"left_out": True} and row.text == "hi"
    finally:
        await writer.close()
        await reader.close()
