"""Conversations as trees, on every engine: moving the branch, the parents rows get, the
reads that follow the current branch, summaries that apply to part of a branch, and the
tree's shape."""

from __future__ import annotations

from typing import Any

import pytest

from ostinato.errors import NotFound
from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock, user_text
from ostinato.store import Store
from ostinato.store.base import (
    AppendMessage,
    AppendSummary,
    Conversation,
    CreateConversation,
    utcnow,
)
from ostinato.store.branches import MoveBranch, NotALeaf
from ostinato.store.tree import WHOLE, Branch


async def conversation(store: Store, texts: list[str]) -> str:
    now = utcnow()
    cid = new_id()
    ops: list[Any] = [CreateConversation(Conversation(cid, "idle", now, now, owner="ann"))]
    ops += [AppendMessage(cid, user_text(t)) for t in texts]
    await store.write(*ops)
    return cid


async def add(store: Store, cid: str, *texts: str) -> list[Message]:
    return list(await store.write(*(AppendMessage(cid, user_text(t)) for t in texts)))


def texts(rows: list[Message]) -> list[str]:
    return [r.text for r in rows]


async def test_a_conversation_that_never_branched_is_one_run(store: Store) -> None:
    cid = await conversation(store, ["a", "b", "c"])
    rows = await store.list_messages(cid)
    assert [(r.seq, r.parent_seq) for r in rows] == [(1, 0), (2, 1), (3, 2)]
    tree = await store.tree(cid)
    assert tree is not None and tree.leaves() == [3] and tree.leaf == 3
    assert (await store.get_conversation(cid)).branch == WHOLE  # type: ignore[union-attr]
    assert await store.tree("nope") is None


async def test_an_edit_forks_and_reads_follow_the_new_branch(store: Store) -> None:
    cid = await conversation(store, ["q1", "a1", "q2", "a2"])
    (branch,) = await store.write(MoveBranch(cid, 2))  # edit q2: fork at its parent, a1
    assert branch == Branch(((1, 2),), 4)
    (q2b, a2b) = await add(store, cid, "q2 edited", "a2 again")
    assert (q2b.seq, q2b.parent_seq, a2b.seq, a2b.parent_seq) == (5, 2, 6, 5)
    assert texts(await store.list_messages(cid)) == ["q1", "a1", "q2 edited", "a2 again"]
    assert texts(await store.list_messages(cid, after_seq=1)) == ["a1", "q2 edited", "a2 again"]
    assert texts(await store.list_messages(cid, limit=3)) == ["q1", "a1", "q2 edited"]
    assert len(await store.list_messages(cid, branch=WHOLE)) == 6  # every branch's rows
    window = await store.window(cid, limit=3)
    assert texts(window.rows) == ["a1", "q2 edited", "a2 again"] and window.more
    tree = await store.tree(cid)
    assert tree is not None
    assert tree.siblings(5) == [3, 5] and tree.siblings(3) == [3, 5]
    assert tree.leaves() == [4, 6] and tree.leaf == 6
    assert tree.parent(5) == 2 and tree.parent(4) == 3


async def test_switching_to_a_leaf_and_writing_there(store: Store) -> None:
    cid = await conversation(store, ["q1", "a1", "q2", "a2"])
    await store.write(MoveBranch(cid, 2))
    await add(store, cid, "q2 edited", "a2 again")
    (back,) = await store.write(MoveBranch(cid, 4, leaf_only=True))
    assert back == Branch(((1, 4),), 6)
    assert texts(await store.list_messages(cid)) == ["q1", "a1", "q2", "a2"]
    (q3,) = await add(store, cid, "q3")  # continues the old branch, with a new seq
    assert (q3.seq, q3.parent_seq) == (7, 4)
    assert texts(await store.list_messages(cid)) == ["q1", "a1", "q2", "a2", "q3"]
    assert texts((await store.window(cid, limit=10)).rows) == ["q1", "a1", "q2", "a2", "q3"]
    tree = await store.tree(cid)
    assert tree is not None and tree.leaves() == [6, 7] and tree.newest_under(3) == 7
    # a switch to the newest leaf continues that run: its next row has no stored parent
    await store.write(MoveBranch(cid, 7, leaf_only=True))
    (q4,) = await add(store, cid, "q4")
    assert (q4.seq, q4.parent_seq) == (8, 7)


async def test_a_switch_to_a_row_that_is_not_a_leaf_names_the_leaves(store: Store) -> None:
    cid = await conversation(store, ["q1", "a1", "q2", "a2"])
    await store.write(MoveBranch(cid, 2))
    await add(store, cid, "q2 edited")
    with pytest.raises(NotALeaf) as raised:
        await store.write(MoveBranch(cid, 3, leaf_only=True))
    assert raised.value.leaves == (4, 5) and "4, 5" in raised.value.message
    with pytest.raises(NotFound):
        await store.write(MoveBranch(cid, 99))
    with pytest.raises(NotFound):
        await store.write(MoveBranch("nope", 1))
    assert texts(await store.list_messages(cid)) == ["q1", "a1", "q2 edited"]  # unchanged


async def test_a_fork_before_the_first_row(store: Store) -> None:
    cid = await conversation(store, ["first", "answer"])
    await store.write(MoveBranch(cid, 0))
    assert await store.list_messages(cid) == []
    (first,) = await add(store, cid, "first, edited")
    assert (first.seq, first.parent_seq) == (3, 0)
    tree = await store.tree(cid)
    assert tree is not None and tree.children(0) == [1, 3] and tree.leaves() == [2, 3]


async def test_a_move_is_undone_with_the_write_that_fails(store: Store) -> None:
    cid = await conversation(store, ["q1", "a1", "q2"])
    with pytest.raises(NotFound):
        await store.write(MoveBranch(cid, 1), AppendMessage("unknown", user_text("x")))
    assert texts(await store.list_messages(cid)) == ["q1", "a1", "q2"]
    (row,) = await add(store, cid, "a2")
    assert row.parent_seq == 3


def _summary(text: str, through: int) -> Message:
    return Message("system", (TextBlock(text),), hidden=True, metadata={"kind": "summary"})


async def test_a_summary_applies_where_the_row_it_ends_at_is_on_the_branch(store: Store) -> None:
    cid = await conversation(store, [f"m{i}" for i in range(1, 7)])
    await store.write(AppendSummary(cid, _summary("up to m4", 4), through_seq=4))  # seq 7
    await add(store, cid, "m8")
    window = await store.window(cid, limit=10)
    assert window.summary is not None and window.summary.text == "up to m4"
    assert texts(window.rows) == ["m5", "m6", "m8"]
    # a branch forked at m2 does not contain m4: the summary is not its
    await store.write(MoveBranch(cid, 2))
    await add(store, cid, "m3 edited")
    window = await store.window(cid, limit=10)
    assert window.summary is None and texts(window.rows) == ["m1", "m2", "m3 edited"]
    # a branch forked at m5 contains m4: the summary made on the other branch is its too
    await store.write(MoveBranch(cid, 5))
    await add(store, cid, "m6 edited")
    window = await store.window(cid, limit=10)
    assert window.summary is not None and texts(window.rows) == ["m5", "m6 edited"]
    # and the window of a branch given explicitly
    other = Branch(((1, 2),), 10)
    assert texts((await store.window(cid, limit=10, branch=other)).rows) == ["m1", "m2"]
