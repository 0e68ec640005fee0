"""Steering a running turn: at each step boundary (every tool call of the step answered,
the next model call not yet made) the turn takes the messages sent to its conversation
with the ``steer`` policy, in their queue order, and writes each as a user row of its
own; the model call that follows sees them.

The messages are read from the store, not handed over in memory, so a turn takes what
was sent to any server on its database. Taking one is a compare-and-set in the store
(``TakeQueued``, in the same write as its row): a message withdrawn or taken meanwhile
makes the write fail whole, and the step reads the queue again. A message no step took
(the turn ended with a final answer) stays queued and runs as the next turn, as a queued
one does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ostinato.errors import Conflict, NotFound
from ostinato.loop.record import TurnRecord
from ostinato.messages import Message
from ostinato.store.base import STEER, QueuedInput, Store, TakeQueued

STEERED = "steered"  # the metadata key of a row a running turn took at a step boundary
QUEUED_ID = "queued_id"  # and of the id it had in the queue (its sender elsewhere finds it)
ATTEMPTS = 3  # reads of the queue a step makes when what it read was taken meanwhile

Taken = Callable[[str, Sequence[QueuedInput]], None]
"""Told (conversation id, the inputs) after a step took steered inputs."""


def steered_row(item: QueuedInput) -> Message:
    """The user row a steered message is written as: its message, marked ``steered``,
    with its queue id."""
    message = item.message
    metadata = {k: v for k, v in message.metadata.items() if k != STEER}
    metadata |= {STEERED: True, QUEUED_ID: item.id}
    return Message("user", message.blocks, message.hidden, metadata)


class Steering:
    """What a turn does at each step boundary to take the messages steered to it."""

    def __init__(self, store: Store, taken: Taken | None = None) -> None:
        self.store = store
        self.taken = taken

    async def take(self, record: TurnRecord) -> list[QueuedInput]:
        """Write every steered message waiting for the turn's conversation as a user
        row of the turn, in queue order; the inputs taken (none: nothing waited)."""
        conversation_id = record.turn.conversation_id
        for _ in range(ATTEMPTS):
            queued = await self.store.list_queued(conversation_id)
            if not queued:  # the common case: nothing waits at all
                return []
            waiting = [q for q in queued if q.steer]
            if not waiting:
                return []
            rows = [steered_row(item) for item in waiting]
            try:
                await record.commit(rows, [TakeQueued(item.id) for item in waiting])
            except (Conflict, NotFound):  # withdrawn or taken meanwhile: read again
                continue
            if self.taken is not None:
                self.taken(conversation_id, waiting)
            return waiting
        return []
