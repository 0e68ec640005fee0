"""The bus: frames to every surface watching a conversation.

Publishing never blocks and costs one dict lookup when nobody watches. Each subscriber
has its own queue; a subscriber that falls more than ``max_backlog`` frames behind is
disconnected (its iterator ends with ``BacklogOverflow``) rather than letting memory grow
without bound; it reconnects and replays the rows it missed from the store.

With several server processes on one database, a ``Relay`` (``ostinato.fanout``) is
attached: every frame published here is also handed to it (a queue put, never a wait),
and frames other processes published arrive through ``deliver``, to this process's
subscribers only. When the relay cannot promise it lost nothing (its connection dropped,
a message went missing) it ends the subscriptions with ``BacklogOverflow`` (``drop``):
they reconnect and replay from the store, as after an overflow here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn, Protocol

from ostinato.frames import Frame

log = logging.getLogger("ostinato.bus")

Command = Callable[[str, dict[str, Any]], Awaitable[object]]
"""What a process does when another asks (``LocalBus.command``): called with the
conversation id and the command's data."""


class BacklogOverflow(Exception):
    """A subscriber fell too far behind and was dropped."""


class Relay(Protocol):
    """Carries frames to the other processes (``ostinato.fanout.Relay``)."""

    def send(self, conversation_id: str, frame: Frame) -> None: ...

    def command(self, kind: str, conversation_id: str, data: dict[str, Any]) -> None: ...

    async def watched_elsewhere(self, conversation_id: str) -> bool: ...

    async def aclose(self) -> None: ...


class Bus(Protocol):
    def publish(self, conversation_id: str, frame: Frame) -> None: ...

    def subscribe(self, conversation_id: str) -> Subscription: ...


class Subscription:
    """An async iterator of frames; close it (or use ``async with``) when done."""

    def __init__(self, bus: LocalBus, conversation_id: str, max_backlog: int) -> None:
        self._bus = bus
        self.conversation_id = conversation_id
        self._queue: asyncio.Queue[Frame | None] = asyncio.Queue()
        self._max_backlog = max_backlog
        self.overflowed = False
        # called when a frame (or the end) is put: a reader that ``poll``s waits for it
        self.bell: Callable[[], None] | None = None

    def _put(self, frame: Frame) -> None:
        if self._queue.qsize() >= self._max_backlog:
            self.overflow()
            return
        self._queue.put_nowait(frame)
        if self.bell is not None:
            self.bell()

    def overflow(self) -> None:
        """End the iterator with ``BacklogOverflow``: the subscriber must replay."""
        self.overflowed = True
        self._queue.put_nowait(None)
        if self.bell is not None:
            self.bell()
        self.close()

    def __aiter__(self) -> AsyncIterator[Frame]:
        return self

    async def __anext__(self) -> Frame:
        frame = await self._queue.get()
        if frame is None:
            self._end()
        return frame

    def take(self) -> Frame | None:
        """The next frame if one is waiting, else ``None`` (also at the end, which is
        left for ``__anext__`` to report)."""
        if self._queue.empty():
            return None
        frame = self._queue.get_nowait()
        if frame is None:
            self._queue.put_nowait(None)  # the end: nothing is put after it
        return frame

    def poll(self) -> Frame | None:
        """The next frame if one is waiting, else ``None``; at the end, raises what
        ``__anext__`` does (``StopAsyncIteration``, or ``BacklogOverflow``). With ``bell``
        set, a reader waits for the bell between polls instead of a pending ``__anext__``."""
        if self._queue.empty():
            return None
        frame = self._queue.get_nowait()
        if frame is None:
            self._queue.put_nowait(None)  # the end: nothing is put after it
            self._end()
        return frame

    def _end(self) -> NoReturn:
        if self.overflowed:
            raise BacklogOverflow(f"subscriber on {self.conversation_id} fell behind")
        raise StopAsyncIteration

    async def get(self, within: float | None = None) -> Frame:
        """The next frame; raises ``TimeoutError`` after ``within`` seconds."""
        async with asyncio.timeout(within):
            return await self.__anext__()

    def close(self) -> None:
        self._bus._remove(self)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class LocalBus:
    def __init__(self, *, max_backlog: int = 10_000) -> None:
        self._subscribers: dict[str, list[Subscription]] = {}
        self._max_backlog = max_backlog
        self._last_seq: dict[str, int] = {}  # kept while someone watches
        self.relay: Relay | None = None
        self._commands: dict[str, list[Command]] = {}
        self._running: set[asyncio.Task[object]] = set()

    def publish(self, conversation_id: str, frame: Frame) -> None:
        """To this process's subscribers, and to the other processes' through the relay."""
        self.deliver(conversation_id, frame)
        if self.relay is not None:
            self.relay.send(conversation_id, frame)

    def listened(self, conversation_id: str) -> bool:
        """Whether a frame published for the conversation now reaches anyone: a
        subscriber here, or the relay (other processes' subscribers). A publisher with a
        frame to make may skip making it when not (``loop.record``)."""
        return self.relay is not None or conversation_id in self._subscribers

    def deliver(self, conversation_id: str, frame: Frame) -> None:
        """To this process's subscribers only (what the relay calls)."""
        subscribers = self._subscribers.get(conversation_id)
        if subscribers:
            self._last_seq[conversation_id] = frame.seq
            for subscription in list(subscribers):
                subscription._put(frame)

    def last_seq(self, conversation_id: str) -> int:
        """The seq of the last frame published to watchers of the conversation (0 if none):
        what a frame published outside a turn's driver carries."""
        return self._last_seq.get(conversation_id, 0)

    def subscribe(self, conversation_id: str) -> Subscription:
        subscription = Subscription(self, conversation_id, self._max_backlog)
        self._subscribers.setdefault(conversation_id, []).append(subscription)
        return subscription

    def subscriber_count(self, conversation_id: str) -> int:
        return len(self._subscribers.get(conversation_id, ()))

    # --- commands between processes (cancel, a decision made elsewhere) ---------------

    def on(self, kind: str, handler: Command) -> None:
        """Run ``handler`` when another process sends a ``kind`` command (``resync``:
        when the relay may have lost commands, e.g. its connection dropped)."""
        self._commands.setdefault(kind, []).append(handler)

    def command(self, kind: str, conversation_id: str, data: dict[str, Any]) -> None:
        """Ask every other process to run its ``kind`` handler (nothing without a relay:
        this process is alone)."""
        if self.relay is not None:
            self.relay.command(kind, conversation_id, data)

    def run_command(self, kind: str, conversation_id: str, data: dict[str, Any]) -> None:
        """A command from another process (what the relay calls): its handler runs in a
        task of its own, so a slow one (a cancel awaiting a teardown) holds up nothing."""
        for handler in self._commands.get(kind, ()):
            task = asyncio.ensure_future(handler(conversation_id, data))
            self._running.add(task)
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[object]) -> None:
        self._running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a command from another server failed", exc_info=task.exception())

    async def watched(self, conversation_id: str) -> bool:
        """Whether a surface watches the conversation here or on another server."""
        if self.subscriber_count(conversation_id):
            return True
        return self.relay is not None and await self.relay.watched_elsewhere(conversation_id)

    def drop(self, conversation_id: str | None = None) -> None:
        """End the subscriptions of one conversation (of all with ``None``) with
        ``BacklogOverflow``: frames may have been lost, they replay from the store."""
        ids = [conversation_id] if conversation_id is not None else list(self._subscribers)
        for cid in ids:
            for subscription in list(self._subscribers.get(cid, ())):
                subscription.overflow()

    async def aclose(self) -> None:
        """Stop the relay (if any); local publishing goes on working."""
        relay, self.relay = self.relay, None
        if relay is not None:
            await relay.aclose()

    def _remove(self, subscription: Subscription) -> None:
        subscribers = self._subscribers.get(subscription.conversation_id)
        if subscribers and subscription in subscribers:
            subscribers.remove(subscription)
            if not subscribers:
                del self._subscribers[subscription.conversation_id]
                self._last_seq.pop(subscription.conversation_id, None)
