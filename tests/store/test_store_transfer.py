"""Export and import on every engine: a conversation with branches, turns, tool calls and
their results (one answered by a later turn), approvals, a summary and an attachment is
exported, imported for its owner, and exported again: every row is the same but the ids.
A broken file stores nothing and says where it is broken. ChatGPT's conversations.json
becomes the same tree."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from ostinato.approvals import Approval, Ending, arguments_hash
from ostinato.context.compaction import summary_row
from ostinato.ids import new_id
from ostinato.messages import FileBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock
from ostinato.store import Store
from ostinato.store.accounts import UpdateConversation
from ostinato.store.base import (
    AppendMessage,
    AppendSummary,
    CreateApproval,
    DecideApproval,
    StartToolCall,
    StartTurn,
    ToolCallRecord,
    Turn,
    append,
    utcnow,
)
from ostinato.store.branches import MoveBranch
from ostinato.transfer.document import ImportRefused
from ostinato.transfer.exporting import conversation_markdown, export_json
from ostinato.transfer.importing import import_document, read_document
from tests.store.test_store_search import conversation, said


async def branched(store: Store) -> str:
    """q1, a1 (a tool call answered by the next turn), q2 edited (two branches), a summary,
    an attachment; archived and pinned; on the first branch."""
    cid = await conversation(store, "ann", "Planted zebra title")
    now = utcnow()
    t1 = Turn(new_id(), cid, new_id(), "finished", now, stop_reason="paused", finished_at=now)
    later = now + timedelta(seconds=1)
    t2 = Turn(new_id(), cid, new_id(), "finished", later, stop_reason="end_turn", finished_at=later)
    await store.write(StartTurn(t1), StartTurn(t2))
    pdf = FileBlock("application/pdf", data="JVBERi0xLjQK", name="plan.pdf")
    await append(store, cid, Message("user", (TextBlock("q1 zebra"), pdf)), t1.id)
    use = ToolUseBlock("call_1", "ask_user", {"question": "which?"})
    await append(store, cid, Message("assistant", (TextBlock("let me ask"), use)), t1.id)
    call = ToolCallRecord("call_1", cid, t1.id, "ask_user", {"question": "which?"}, "ok", now)
    approval = Approval(
        new_id(),
        cid,
        t1.id,
        "call_1",
        "ask_user",
        {},
        arguments_hash("ask_user", {}),
        "safe",
        None,
        now,
    )
    await store.write(StartToolCall(call), CreateApproval(approval))
    await store.write(DecideApproval(approval.id, Ending.APPROVED, now, "ann"))
    answer = Message("user", (ToolResultBlock("call_1", "the red one"),))
    await store.write(AppendMessage(cid, answer, t2.id, {"call_1": t1.id}))
    await append(store, cid, said("a2 first"), t2.id)
    await store.write(MoveBranch(cid, 3))  # regenerate a2
    await append(store, cid, said("a2 second"), t2.id)
    await store.write(AppendSummary(cid, summary_row("sum", 2), 2))
    await store.write(MoveBranch(cid, 4, leaf_only=True))
    await store.write(UpdateConversation(cid, pinned=True, archived_at=now))
    return cid


def _same(document: dict[str, Any]) -> list[Any]:
    """The document's conversations with ids replaced by their order of appearance."""
    names: dict[str, str] = {}

    def name(value: Any) -> Any:
        return names.setdefault(value, f"id{len(names)}") if isinstance(value, str) else value

    out = []
    for each in document["conversations"]:
        each = dict(each, id=None)
        for key in ("turns", "approvals"):
            each[key] = [dict(r, id=name(r["id"])) for r in each[key]]
        for key in ("tool_calls", "approvals", "messages"):
            each[key] = [dict(r, turn_id=name(r["turn_id"])) for r in each[key]]
        out.append(each)
    return out


async def text_of(store: Store, cid: str) -> str:
    conversation = await store.get_conversation(cid)
    assert conversation is not None
    return "".join([piece async for piece in export_json(store, [conversation], "ann")])


async def test_round_trip_keeps_every_row(store: Store) -> None:
    cid = await branched(store)
    first = await text_of(store, cid)
    (copy,) = await import_document(store, read_document(first, "ann"), "ann")
    assert copy != cid
    second = await text_of(store, copy)
    before, after = json.loads(first), json.loads(second)
    assert _same(after) == _same(before)
    rows = before["conversations"][0]["messages"]
    assert [(m["seq"], m["parent_seq"]) for m in rows] == [
        (1, 0),
        (2, 1),
        (3, 2),
        (4, 3),
        (5, 3),
        (6, 5),
    ]
    assert before["conversations"][0]["branch_tip"] == 4
    made = await store.get_conversation(copy)  # ids sort by the millisecond, not finer
    assert made is not None and made.owner == "ann"
    assert made.pinned and made.archived_at is not None
    assert [m.text for m in await store.list_messages(copy)][-1] == "a2 first"
    hits = await store.search_messages("zebra", owner="ann")
    assert {h.conversation_id for h in hits} == {cid, copy}


async def test_markdown_follows_the_branch(store: Store) -> None:
    cid = await branched(store)
    conversation = await store.get_conversation(cid)
    assert conversation is not None
    text = "".join([p async for p in conversation_markdown(store, conversation)])
    assert text.startswith("# Planted zebra title\n")
    assert "a2 first" in text and "a2 second" not in text and "sum" not in text
    assert "*Attached: plan.pdf (application/pdf)*" in text and "the red one" in text


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d: d.update(version=2), "version"),
        (lambda d: d.update(owner="bob"), "owner"),
        (
            lambda d: d["conversations"][0]["messages"][2].update(turn_id="nope"),
            "messages[2].turn_id",
        ),
        (
            lambda d: d["conversations"][0]["messages"][3].update(parent_seq=9),
            "messages[3].parent_seq",
        ),
        (
            lambda d: d["conversations"][0]["messages"][0].update(blocks=[{"type": "x"}]),
            "messages[0].blocks",
        ),
        (
            lambda d: d["conversations"][0]["tool_calls"][0].update(turn_id="x"),
            "tool_calls[0].turn_id",
        ),
    ],
)
async def test_a_broken_file_stores_nothing(store: Store, change: Any, where: str) -> None:
    cid = await branched(store)
    document = json.loads(await text_of(store, cid))
    document["conversations"].insert(0, json.loads(await text_of(store, cid))["conversations"][0])
    change(document)
    with pytest.raises(ImportRefused, match=where.replace("[", r"\[").replace("]", r"\]")):
        await import_document(store, read_document(json.dumps(document), "ann"), "ann")
    assert [c.id for c in await store.list_conversations(owner="ann")] == [cid]


def chatgpt_file() -> list[dict[str, Any]]:
    """A conversations.json as ChatGPT writes it: a root with no message, a hidden system
    message, a question asked twice (edited), two answers to the second."""

    def node(
        nid: str, parent: str | None, children: list[str], role: str | None, text: str = ""
    ) -> Any:
        message = None
        if role is not None:
            message = {
                "id": nid,
                "author": {"role": role, "name": None, "metadata": {}},
                "create_time": 1_700_000_000.5,
                "content": {"content_type": "text", "parts": [text]},
                "status": "finished_successfully",
                "metadata": {"is_visually_hidden_from_conversation": role == "system"},
            }
        return {"id": nid, "message": message, "parent": parent, "children": children}

    mapping = {
        "root": node("root", None, ["sys"], None),
        "sys": node("sys", "root", ["q1", "q1b"], "system"),
        "q1": node("q1", "sys", ["a1"], "user", "first question"),
        "a1": node("a1", "q1", [], "assistant", "first answer"),
        "q1b": node("q1b", "sys", ["a2", "a3"], "user", "edited question"),
        "a2": node("a2", "q1b", [], "assistant", "answer two"),
        "a3": node("a3", "q1b", [], "assistant", "answer three"),
    }
    return [
        {
            "title": "From ChatGPT",
            "create_time": 1_700_000_000.0,
            "update_time": 1_700_000_100.0,
            "mapping": mapping,
            "current_node": "a2",
            "conversation_id": "c-1",
        }
    ]


async def test_chatgpt_export_becomes_the_same_tree(store: Store) -> None:
    document = read_document(json.dumps(chatgpt_file()), "ann")
    (cid,) = await import_document(store, document, "ann")
    every = await store.list_messages(cid, branch=None)
    on_branch = [m.text for m in every]
    assert on_branch == ["edited question", "answer two"]
    tree = await store.tree(cid)
    assert tree is not None and tree.leaf == 4
    conversation = await store.get_conversation(cid)
    assert conversation is not None and conversation.title == "From ChatGPT"
    exported = json.loads(await text_of(store, cid))["conversations"][0]["messages"]
    assert [(m["parent_seq"], m["blocks"][0]["text"]) for m in exported] == [
        (0, "first question"),
        (1, "first answer"),
        (0, "edited question"),
        (3, "answer two"),
        (3, "answer three"),
    ]
    assert exported[0]["created_at"].startswith("2023-11-14T22:13:20.5")


async def test_not_a_known_format(store: Store) -> None:
    with pytest.raises(ImportRefused, match="neither"):
        read_document(b'{"a": 1}', "ann")
    with pytest.raises(ImportRefused, match="not JSON"):
        read_document(b"{", "ann")
    with pytest.raises(ImportRefused, match=r"\[0\]\.mapping"):
        read_document(b"[1]", "ann")
