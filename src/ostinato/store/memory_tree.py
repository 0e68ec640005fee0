"""The in-memory store's side of conversation trees: the reads that follow a branch,
and ``MoveBranch`` (the reference semantics of ``store.branches``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ostinato.errors import NotFound
from ostinato.messages import Message
from ostinato.store.base import HistoryWindow
from ostinato.store.branches import MoveBranch, moved
from ostinato.store.tree import Branch, Tree

if TYPE_CHECKING:
    from ostinato.store.memory_tables import MemoryTables


def tree_of(t: MemoryTables, conversation_id: str) -> Tree | None:
    conversation = t._conversations.get(conversation_id)
    if conversation is None:
        return None
    rows = t._messages.get(conversation_id, [])
    starts = [(m.seq or 0, m.parent_seq or 0) for m in rows if m.parent_seq != (m.seq or 0) - 1]
    return Tree.of(starts, rows[-1].seq or 0 if rows else 0, conversation.branch)


def branch_rows(t: MemoryTables, conversation_id: str, branch: Branch | None) -> Sequence[Message]:
    """The rows of ``branch`` (the conversation's current one if None), in seq order."""
    rows = t._messages.get(conversation_id, [])
    if branch is None:
        conversation = t._conversations.get(conversation_id)
        branch = conversation.branch if conversation is not None else Branch()
    return rows if branch.whole else [m for m in rows if m.seq in branch]


def window_of(
    t: MemoryTables, conversation_id: str, limit: int, branch: Branch | None
) -> HistoryWindow:
    if branch is None:
        conversation = t._conversations.get(conversation_id)
        branch = conversation.branch if conversation is not None else Branch()
    summary, through = None, 0
    for row, upto in reversed(t._summaries.get(conversation_id, [])):
        if upto in branch:
            summary, through = row, upto
            break
    picked: list[Message] = []
    more, whole = False, branch.whole  # every row is on a whole branch: none to ask
    cap = max(limit, 0)
    for row in reversed(t._messages.get(conversation_id, [])):
        if (row.seq or 0) <= through:
            break
        if (not whole and row.seq not in branch) or row.metadata.get("kind") == "summary":
            continue
        if len(picked) == cap:
            more = True
            break
        picked.append(row)
    picked.reverse()
    return HistoryWindow(summary, picked, more)


def move_branch(t: MemoryTables, op: MoveBranch, undo: list[Callable[[], None]]) -> Branch:
    tree = tree_of(t, op.conversation_id)
    if tree is None:
        raise NotFound(f"no conversation {op.conversation_id!r}")
    branch = moved(tree, op)
    conversation = t._conversations[op.conversation_id]
    undo.append(lambda: t._conversations.__setitem__(conversation.id, conversation))
    t._conversations[conversation.id] = dataclasses.replace(conversation, branch=branch)
    return branch


def parent_for(branch: Branch, rows: Sequence[Message]) -> int:
    """The parent of the next row of a conversation (its ``rows``, on ``branch``): its
    newest row, unless its branch was moved and no row was written since."""
    newest = rows[-1].seq or 0 if rows else 0
    return newest if newest > branch.since else branch.tip


TREE_WRITES: dict[type, Callable[[Any, Any, Any], Any]] = {MoveBranch: move_branch}
