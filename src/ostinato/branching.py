"""Edits, regenerations and switches: what each asks of a conversation's tree, checked
against the store before anything is written.

An edit of user row N is a new user message whose turn begins by moving the branch to
N's parent (the new row becomes N's sibling); a regenerate of an answer is a turn that
begins by moving the branch to the question the answer answers, and adds no user row
(its first row is a sibling of the old answer's first row). Either is submitted like a
new message (``Runtime.submit``), so it waits, supersedes or is refused by the same
policy, and one that waits is kept in the store's queue as a message that carries its
move in its metadata (``FORK_AT``): it survives a restart like any queued message.
A switch moves the branch to a leaf and starts no turn; it is refused while a turn runs.

The move itself is written with the turn's start (``loop.opening``), after what the old
branch waited on was answered there (a card dismissed, an approval ended), so every
branch keeps every call answered, and a call in a branch left behind is never re-run.
"""

from __future__ import annotations

from dataclasses import dataclass

from ostinato.errors import Conflict, InvalidRequest, NotFound
from ostinato.messages import Message
from ostinato.store.base import HistoryWindow, Store
from ostinato.store.tree import WHOLE, Tree

FORK_AT = "fork_at"  # a message's metadata: the row its turn moves the branch to first
EDIT_OF = "edit_of"  # a user row's metadata: the row it is an edit of
REGENERATE = "regenerate"  # a queued input's metadata: the answer it asks again for
LOOK_BACK = 200  # how far back from an answer its question is looked for


async def row_at(store: Store, conversation_id: str, seq: int) -> Message:
    """Row ``seq`` of the conversation, on any branch; ``NotFound`` if it has none."""
    found = await store.list_messages(conversation_id, after_seq=seq - 1, limit=1, branch=WHOLE)
    if seq < 1 or not found or found[0].seq != seq:
        raise NotFound(f"no message {seq} in conversation {conversation_id!r}")
    return found[0]


async def edit_of(store: Store, conversation_id: str, seq: int, message: Message) -> Message:
    """``message`` as the edit of user row ``seq``: ``InvalidRequest`` unless that row is
    a user message a person sees (not an answer, a tool's row, or a hidden row)."""
    edited = await row_at(store, conversation_id, seq)
    if edited.role != "user" or edited.hidden:
        what = "a hidden row" if edited.hidden else f"a {edited.role} row"
        raise InvalidRequest(
            f"message {seq} is {what}: only a user message can be edited "
            "(regenerate an answer instead)"
        )
    metadata = {**message.metadata, EDIT_OF: seq, FORK_AT: edited.parent_seq or 0}
    return Message("user", message.blocks, message.hidden, metadata)


async def regenerating(store: Store, conversation_id: str, seq: int) -> Message:
    """What a regenerate of answer ``seq`` is submitted as: the question it answers, marked
    to move the branch there and add no row. ``InvalidRequest`` unless ``seq`` is an
    answer a person sees with a question before it."""
    answer = await row_at(store, conversation_id, seq)
    if answer.role != "assistant" or answer.hidden:
        what = "a hidden row" if answer.hidden else f"a {answer.role} row"
        raise InvalidRequest(
            f"message {seq} is {what}: regenerate names an answer (an assistant message); "
            "a user message is edited instead"
        )
    tree = await store.tree(conversation_id)
    assert tree is not None
    before = await store.window(conversation_id, limit=LOOK_BACK, branch=tree.branch_to(seq))
    question = next((r for r in reversed(before.rows) if r.role == "user"), None)
    if question is None or question.seq is None:
        raise InvalidRequest(f"message {seq} answers no question this conversation still has")
    metadata = {REGENERATE: seq, FORK_AT: question.seq}
    return Message("user", question.blocks, question.hidden, metadata)


@dataclass(frozen=True, slots=True)
class Fork:
    """Where a turn moves the branch before it begins (``at``), and the history there."""

    at: int
    window: HistoryWindow
    regenerate: bool


async def fork_for(store: Store, message: Message, conversation_id: str, limit: int) -> Fork | None:
    """The move a message's turn begins with (an edit's, a regenerate's), or None."""
    at = message.metadata.get(FORK_AT)
    if not isinstance(at, int):
        return None
    tree = await store.tree(conversation_id)
    if tree is None or not (at == 0 or tree.has(at)):
        raise NotFound(f"no message {at} in conversation {conversation_id!r}")
    window = await store.window(conversation_id, limit=limit, branch=tree.branch_to(at))
    return Fork(at, window, REGENERATE in message.metadata)


def as_stored(message: Message) -> Message:
    """A message's metadata as its row keeps it: without the move (the tree holds it)."""
    if FORK_AT not in message.metadata:
        return message
    metadata = {k: v for k, v in message.metadata.items() if k not in (FORK_AT, REGENERATE)}
    return Message(message.role, message.blocks, message.hidden, metadata)


def leaf_of_sibling(tree: Tree, seq: int) -> int:
    """The leaf a switch to row ``seq``'s branch goes to: the newest row under it."""
    return tree.newest_under(seq)


def refuse_switch_while_running(busy: bool, state: str) -> None:
    """A switch would leave a running turn writing to a branch that is no longer
    current: ``Conflict`` while one runs (or is beginning)."""
    if busy or state == "running":
        raise Conflict(
            "a turn is running in this conversation: switch branches when it has ended "
            "(or cancel it)"
        )
