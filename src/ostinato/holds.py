"""One running turn per conversation across server processes (issue 16).

In one process a conversation's ``Worker`` (``ostinato.turns``) runs its turns one at a
time. With several servers on one database each worker first *holds* the conversation
in the store (``ConversationHolds``: a row naming this server's lease and the worker),
for as long as it runs turns, and lets it go when it winds down. A worker on another
server waits for the hold: it tries again when the holder says it let go (a ``free``
command through the bus's relay) and every ``POLL_S`` in any case. A hold whose
server's lease is gone (SIGKILL: ``ostinato.leases``) is anyone's to take.

So a message posted to server B while server A runs the conversation's turn is stored in
the queue first (nothing accepted is lost if B dies: recovery runs it), then B's worker
runs it once A's worker has finished its own queue. The order across servers is the
order in which holds are taken: a message waits for the other server's queue to empty.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ostinato.bus import LocalBus
from ostinato.store.leases import ConversationHolds

log = logging.getLogger("ostinato.holds")

POLL_S = 0.5  # a waiting worker tries again at least this often


class Holds:
    def __init__(self, store: ConversationHolds, holder: str, bus: LocalBus) -> None:
        self.store = store
        self.holder = holder  # this server's lease id
        self.bus = bus
        self._freed: dict[str, asyncio.Event] = {}
        bus.on("free", self._free)

    async def held_elsewhere(self, conversation_id: str) -> bool:
        return await self.store.held_elsewhere(conversation_id, self.holder)

    async def claim(self, conversation_id: str, token: str, stopping: asyncio.Event) -> bool:
        """Wait until this worker holds the conversation; False if ``stopping`` is set
        first (the server shuts down)."""
        freed = self._freed.setdefault(conversation_id, asyncio.Event())
        try:
            while not stopping.is_set():
                freed.clear()
                if await self.store.claim_conversation(conversation_id, self.holder, token):
                    return True
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(POLL_S):
                        await _first(freed, stopping)
            return False
        finally:
            self._freed.pop(conversation_id, None)

    async def release(self, conversation_id: str, token: str) -> None:
        try:
            await self.store.release_conversation(conversation_id, token)
        except Exception:  # the store is gone: the hold lapses with this server's lease
            log.warning("could not release the hold on %s", conversation_id)
            return
        self.bus.command("free", conversation_id, {})

    async def _free(self, conversation_id: str, _data: object) -> None:
        event = self._freed.get(conversation_id)
        if event is not None:
            event.set()


async def _first(*events: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
