"""A message that arrives while its conversation is busy: stored in the conversation's
queue at once (so a crash loses nothing), given its place in the worker's line
(``turns.Worker.queue``), and announced with an ``input.queued`` frame. A message sent
with the ``steer`` policy is marked so in the queue: the running turn takes it at its
next step boundary (``loop.steering``)."""

from __future__ import annotations

import dataclasses
import logging

from ostinato import observe
from ostinato.branching import FORK_AT
from ostinato.bus import LocalBus
from ostinato.consent import ConsentGate
from ostinato.frames import InputQueued
from ostinato.ids import new_id
from ostinato.messages import Message
from ostinato.models.base import Model
from ostinato.store.base import STEER, Enqueue, QueuedInput, Store, utcnow
from ostinato.submissions import NewMessage, Submission
from ostinato.turns import Worker

log = logging.getLogger("ostinato.queueing")


def steer_marked(message: Message) -> Message:
    """The message as it waits in the queue for a running turn to take it."""
    metadata = {**message.metadata, STEER: True}
    return Message(message.role, message.blocks, message.hidden, metadata)


async def enqueue(
    store: Store,
    consent: ConsentGate,
    worker: Worker,
    new: NewMessage,
    model: Model | None,
    *,
    holder: str | None,
    steer: bool = False,
) -> Submission:
    """Store a message in the busy conversation's queue (``Worker.queue``)."""
    cid = worker.conversation_id
    steer = steer and FORK_AT not in new.message.metadata  # an edit waits: it forks
    message = steer_marked(new.message) if steer else new.message
    item = QueuedInput(new_id(), cid, message, utcnow(), new.client_message_id, holder=holder)

    async def store_it() -> Submission:
        (queued,) = await store.write(Enqueue(item))
        # The user typed instead of answering. Only now that the message is in the queue:
        # the dismissal lets the waiting turn go on at once, and a steered message must
        # be there for its next step to take. The message is accepted once stored: an
        # approval left undismissed ends as it would have (answered, or timed out).
        try:
            await consent.dismiss(cid)
        except Exception:
            log.warning("the approvals waiting in %s were not dismissed", cid, exc_info=True)
        return Submission(dataclasses.replace(new, queued=queued), model)

    return await worker.queue(store_it)


def announce(bus: LocalBus, worker: Worker, queued: QueuedInput) -> None:
    """Tell every surface a message is queued (``input.queued``; its ``run_id`` is the
    turn it waits behind, when that turn runs here)."""
    observe.queued(1)
    current, cid = worker.current, worker.conversation_id
    bus.publish(
        cid,
        InputQueued(
            run_id=current.run_id if current else "",
            seq=current.position() if current else bus.last_seq(cid),
            queued_id=queued.id,
            position=queued.position,
            client_message_id=queued.client_message_id,
            steer=queued.steer,
        ),
    )
