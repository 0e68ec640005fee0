"""The messages waiting in a conversation's queue, seen and changed before they run: the
list, an edit of one's text, a withdrawal. Each change is a compare-and-set in the store
(only a message still queued changes: ``Conflict`` once a turn took it) and is announced
with an ``input.changed`` frame. A message is read back from the store as its turn
begins (``fresh``), so an edit made through another server counts too."""

from __future__ import annotations

import dataclasses
from typing import Protocol

from ostinato.bus import LocalBus
from ostinato.errors import Conflict, InvalidRequest
from ostinato.frames import InputChanged
from ostinato.messages import Message, TextBlock
from ostinato.store.base import Conversation, EditQueued, QueuedInput, Store
from ostinato.submissions import NewMessage, Submission
from ostinato.turns import Workers

GONE = (
    "this message no longer waits in the queue: it was withdrawn, or a turn (on another "
    "server, for a message sent with 'steer') took it; what was taken is in the "
    "conversation (watch /events)"
)
WITHDRAWN = "this message was withdrawn before its turn began"


class _Host(Protocol):
    store: Store
    bus: LocalBus
    _workers: Workers

    async def conversation(self, conversation_id: str) -> Conversation: ...


class QueueEdits:
    """The runtime's view of the waiting messages (``ostinato.waiting``)."""

    async def waiting(self: _Host, conversation_id: str) -> list[QueuedInput]:
        """The conversation's waiting messages, in the order they will run."""
        await self.conversation(conversation_id)
        return await self.store.list_queued(conversation_id)

    async def edit_waiting(
        self: _Host, conversation_id: str, queued_id: str, text: str
    ) -> QueuedInput:
        """Change a waiting message's text (its files and marks kept). ``NotFound`` if
        it is not this conversation's, ``Conflict`` once a turn took it."""
        if not text.strip():
            raise InvalidRequest("a message needs some text")
        item = await _find(self.store, conversation_id, queued_id)
        files = tuple(b for b in item.message.blocks if not isinstance(b, TextBlock))
        old = item.message
        message = Message(old.role, (TextBlock(text), *files), old.hidden, old.metadata)
        await self.store.write(EditQueued(conversation_id, queued_id, message))
        edited = dataclasses.replace(item, message=message)
        _announce(self.bus, conversation_id, queued_id, message)
        return edited

    async def withdraw_waiting(self: _Host, conversation_id: str, queued_id: str) -> QueuedInput:
        """Withdraw a waiting message: it will not run, and its sender is told."""
        item = await _find(self.store, conversation_id, queued_id)
        await self.store.write(EditQueued(conversation_id, queued_id))
        self._workers.withdrawn(conversation_id, queued_id, Conflict(WITHDRAWN))
        _announce(self.bus, conversation_id, queued_id, None)
        return dataclasses.replace(item, status="dropped")


def _announce(bus: LocalBus, cid: str, queued_id: str, message: Message | None) -> None:
    """``input.changed`` to every surface: the new version, or (None) withdrawn."""
    seq = bus.last_seq(cid)
    withdrawn = message is None
    frame = InputChanged(
        run_id="", seq=seq, queued_id=queued_id, message=message, withdrawn=withdrawn
    )
    bus.publish(cid, frame)


async def _find(store: Store, conversation_id: str, queued_id: str) -> QueuedInput:
    """The waiting message, or what the store says of it (``NotFound``, ``Conflict``)."""
    for item in await store.list_queued(conversation_id):
        if item.id == queued_id:
            return item
    await store.write(EditQueued(conversation_id, queued_id, None))  # raises why
    raise Conflict(GONE)  # (not reached: a message still queued is listed)


async def fresh(store: Store, submission: Submission) -> None:
    """Read a queued message back as its turn begins: its latest text (an edit), or
    ``Conflict`` when it no longer waits (withdrawn, or taken by a turn elsewhere)."""
    queued = submission.queued
    if queued is None or not isinstance(submission.input, NewMessage):
        return
    for item in await store.list_queued(queued.conversation_id):
        if item.id == queued.id:
            submission.input = dataclasses.replace(
                submission.input, message=item.message, queued=item
            )
            return
    raise Conflict(GONE)
