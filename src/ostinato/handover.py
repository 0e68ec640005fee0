"""Hand-over at shutdown (issue 33): a server told to stop, with other servers on the
same database, hands its running turns to them instead of cancelling them.

1. ``Workers.drain`` asks each running turn to stop at its next step boundary (``ask``):
   the moment before a model call, when every tool call the turn made has its result
   stored. A tool call in flight finishes first (up to the grace period); a model call
   in flight finishes and is committed first.
2. There the driver marks the turn handed over (``mark``): a compare-and-set of the
   turn's ``holder`` from this server's lease id to ``handed:<lease id>``. The turn stays
   ``running`` in the store with every row it wrote; nothing else is written. Its task
   ends with ``HandedOver`` (a waiting request gets a 503 that says the turn goes on).
3. The server tells the others (the bus command ``handed``, through the relay) and then
   releases its lease. Another server's sweep (``recovery.find``: at once on that command,
   and in any case after each renewal of its lease) sees a
   running turn whose holder is ``handed:...`` (no live lease has that id, so it is
   gone), claims it by the same compare-and-set, and its worker continues the same turn
   (same id and run id) from the stored rows once it holds the conversation
   (``ostinato.holds``): the next frame's seq follows the last committed row, no row is
   written twice, and no call made by the first server is made again.

A turn marked by a server whose sweep runs an older version (one without this module)
is closed by that version's recovery as ``interrupted``: the old behaviour, nothing lost.
With a single server (or SQLite) nothing is handed over: the drain is as before.
"""

from __future__ import annotations

from ostinato.errors import ShuttingDown
from ostinato.leases import holders

PREFIX = "handed:"
HANDED = "handed"  # the bus command a server sends when it handed turns over
HANDED_OVER = (
    "the server is shutting down and handed this turn to another server, which goes on "
    "with it: its frames continue on the conversation's /events stream (reconnect with "
    "after_seq to any server); do not send the message again"
)
RETRY_AFTER_S = 2.0


class HandedOver(ShuttingDown):
    """A turn stopped here at a step boundary and goes on on another server."""

    code = "handed_over"

    def __init__(self) -> None:
        super().__init__(HANDED_OVER, retry_after=RETRY_AFTER_S)


def mark(holder: str | None) -> str:
    """The holder a handed-over turn is left with."""
    return f"{PREFIX}{holder or ''}"


def handed(holder: str | None) -> bool:
    """Whether a turn with this holder was handed over by a server that shut down."""
    return holder is not None and holder.startswith(PREFIX)


async def others_alive(store: object, me: str | None) -> bool:
    """Whether another server with a live lease shares the store: someone to hand to."""
    if me is None:
        return False
    who = await holders(store, me)
    return bool(who.live - {me})
