"""Moving a conversation's branch: ``TreeMoves``, the runtime's edits, regenerations and
switches. A switch is the one move that starts no turn (edits and regenerates fork as
their turns begin: ``ostinato.branching``).

A switch names a leaf (``NotALeaf``, naming the leaves, otherwise). It is refused while
a turn runs, here or on another server (the turn writes its rows to the current branch).
A paused conversation's card is dismissed and its pending approvals declined first, in
the branch it leaves, as a cancel would: every branch keeps every call answered, and a
call left behind is never run. The move and those answers are one write; every surface
is told with ``branch.changed``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ostinato.branching import edit_of, refuse_switch_while_running, regenerating
from ostinato.frames import MessageCommitted
from ostinato.loop.begin import publish_branch
from ostinato.loop.opening import Parts, pending_approvals
from ostinato.loop.setup import waiting_answers
from ostinato.messages import Message
from ostinato.store.base import Conversation, SetConversationState, WriteOp
from ostinato.store.branches import MoveBranch
from ostinato.store.tree import Branch
from ostinato.submissions import Submission, user_message
from ostinato.turns import Workers


async def switch_branch(
    parts: Parts, conversation: Conversation, leaf: int, *, busy: bool, history_limit: int
) -> Branch:
    """Make the branch that ends at ``leaf`` current; ``busy``: a turn runs or begins in
    this process."""
    refuse_switch_while_running(busy, conversation.state)
    cid = conversation.id
    ops: list[WriteOp] = []
    if conversation.state == "paused":
        ops, _ = await answer_waiting(parts, cid, history_limit)
    results = await parts.store.write(*ops, MoveBranch(cid, leaf, leaf_only=True))
    for row in results:
        if isinstance(row, Message):
            parts.bus.publish(cid, MessageCommitted(run_id="", seq=row.seq or 0, message=row))
    branch = results[-1]
    assert isinstance(branch, Branch)
    publish_branch(parts.bus, cid, "", branch)
    return branch


async def answer_waiting(
    parts: Parts, conversation_id: str, history_limit: int
) -> tuple[list[WriteOp], list[str]]:
    """The ops that end what a paused conversation waits on, as a cancel does (cards
    dismissed, approvals declined) and leave it idle; and the tool_use ids answered."""
    history = (await parts.store.window(conversation_id, limit=history_limit)).rows
    pending = await pending_approvals(parts.store, conversation_id, history)
    ops, answered = waiting_answers(conversation_id, history, pending, None)
    ops.append(SetConversationState(conversation_id, "idle"))
    return ops, answered


class _Host(Parts, Protocol):
    """What ``TreeMoves`` needs of the runtime it is part of."""

    history_limit: int
    _workers: Workers

    @property
    def submit(self) -> Callable[..., Awaitable[Submission]]:
        """``Runtime.submit``."""
        ...

    async def conversation(self, conversation_id: str) -> Conversation: ...

    def busy(self, conversation_id: str) -> bool: ...


class TreeMoves:
    """The runtime's edits, regenerations and switches (``ostinato.branching``)."""

    async def edit(
        self: _Host, conversation_id: str, seq: int, message: Message | str, **kw: Any
    ) -> Submission:
        """Edit user row ``seq``: a message whose turn forks the branch at the row's
        parent, submitted like one (``submit``'s keywords, its policy too)."""
        asked = user_message(message, kw.get("client_message_id"))
        edited = await edit_of(self.store, conversation_id, seq, asked)
        return await self.submit(conversation_id, edited, **kw)

    async def regenerate(self: _Host, conversation_id: str, seq: int, **kw: Any) -> Submission:
        """Ask again for answer ``seq``: a turn that forks the branch at the question it
        answers (with ``skill`` or ``model``, another agent or model answers)."""
        asked = await regenerating(self.store, conversation_id, seq)
        return await self.submit(conversation_id, asked, **kw)

    async def switch_branch(self: _Host, conversation_id: str, leaf: int) -> Branch:
        """Make the branch that ends at row ``leaf`` current (``switch_branch``)."""
        conversation = await self.conversation(conversation_id)
        holds = self._workers.holds
        busy = self.busy(conversation_id) or (
            holds is not None and await holds.held_elsewhere(conversation_id)
        )
        limit = self.history_limit
        return await switch_branch(self, conversation, leaf, busy=busy, history_limit=limit)
