"""The store's side of conversation trees: moving a conversation's current branch, and
reading its tree (``store.tree`` holds the shapes and the rules, pure).

A branch is moved by ``MoveBranch``: to any row, where an edit or a regenerate forks
(the next row written becomes that row's child), or to a leaf only, for a switch.
Nothing is deleted or rewritten: the rows of the branch left behind stay, and the next
rows get new, higher seqs. Reads follow the current branch unless told otherwise
(``Store.list_messages``, ``Store.window``); ``tree`` gives the whole shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ostinato.errors import InvalidRequest, NotFound
from ostinato.messages import Message
from ostinato.store.tree import Branch, Tree


@dataclass(frozen=True, slots=True)
class HistoryWindow:
    """The newest part of a branch, as the store reads it for a request.

    ``summary`` is the latest summary row (the compaction watermark) of a part of the
    branch (it summarises rows through one of the branch's rows, wherever it was made),
    ``rows`` the newest rows of the branch after the rows it summarises, oldest first, at
    most the limit asked for (summary rows themselves are never among them); ``more``
    says older rows were left out.
    """

    summary: Message | None
    rows: list[Message]
    more: bool


class NotALeaf(InvalidRequest):
    """A switch named a row that is not a leaf; ``leaves`` are the rows it may name."""

    def __init__(self, seq: int, leaves: Sequence[int]) -> None:
        named = ", ".join(str(s) for s in leaves) or "none"
        super().__init__(
            f"row {seq} is not a leaf of this conversation: a branch is switched to by its "
            f"last row, one of the leaves: {named}"
        )
        self.seq = seq
        self.leaves = tuple(leaves)


@dataclass(frozen=True, slots=True)
class MoveBranch:
    """Make conversation ``conversation_id``'s current branch the one that ends at row
    ``tip`` (0: before its first row); the next row written follows ``tip``. Returns the
    new ``Branch``.

    With ``leaf_only`` (a switch) ``tip`` must be a leaf: ``NotALeaf`` otherwise.
    ``NotFound`` for an unknown conversation, and for a row it does not have.
    """

    conversation_id: str
    tip: int
    leaf_only: bool = False


TreeOp = MoveBranch
TREE_OPS: tuple[type, ...] = (MoveBranch,)


def moved(tree: Tree, op: MoveBranch) -> Branch:
    """The branch ``op`` makes current in ``tree``: the rule both kinds of store follow."""
    if op.tip < 0 or op.tip > tree.newest or (op.tip == 0 and op.leaf_only):
        raise NotFound(f"no message {op.tip} in conversation {op.conversation_id!r}")
    if op.leaf_only and not tree.is_leaf(op.tip):
        raise NotALeaf(op.tip, tree.leaves())
    return tree.branch_to(op.tip)


class TreeReads(Protocol):
    async def list_messages(
        self,
        conversation_id: str,
        *,
        after_seq: int = 0,
        limit: int | None = None,
        include_hidden: bool = True,
        branch: Branch | None = None,
    ) -> list[Message]:
        """The rows of the current branch (or of ``branch``; ``tree.WHOLE``: every row of
        every branch) in seq order, after ``after_seq``."""
        ...

    async def window(
        self, conversation_id: str, *, limit: int, branch: Branch | None = None
    ) -> HistoryWindow:
        """The latest summary and up to ``limit`` newest rows after it, of the current
        branch (or of ``branch``; see ``HistoryWindow``); reads O(limit) rows whatever
        the conversation's length, and O(1) more per range of the branch it reaches."""
        ...

    async def tree(self, conversation_id: str) -> Tree | None:
        """The conversation's tree (its runs, and its current branch's last row), or None
        for an unknown conversation. One scan of the run starts' index: its cost grows
        with the number of branches, not of rows."""
        ...
