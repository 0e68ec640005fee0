"""Frames across server processes: the ``Relay`` behind a ``LocalBus`` (issue 16).

Several ``ostinato serve`` processes on one database each have their own bus; the relay
carries every frame one of them publishes to the others, over a ``Transport``:
PostgreSQL ``LISTEN/NOTIFY`` (``fanout_pg``) or Redis pub/sub (``fanout_redis``).

The store stays the truth. A ``message`` frame (a committed row, ``durable``) travels as
its *position* (conversation id, seq, run id, client message id); a receiver with
someone watching that conversation reads the row from the store and delivers the same
``message`` frame its own process would have. Every other frame is small and ephemeral
(text deltas, tool progress, approvals asked) and travels whole, as its JSON; one that
does not fit the transport's payload limit (PostgreSQL's is 8000 bytes) is cut into
parts sent together (one ``send``, one transaction), so they arrive together.

Order and loss: one process sends its payloads from one task, in publish order, and each
carries ``origin`` (the sending process) and ``n`` (that process's payload counter). A
receiver handles payloads in arrival order in one task (a row read finishes before the
next frame is delivered), so a subscriber sees one process's frames in the order they
were published. A receiver that sees a gap in an origin's ``n`` (a send failed, the
connection dropped) cannot know which conversations lost frames: it ends every local
subscription with ``BacklogOverflow`` (``LocalBus.drop``), and each surface reconnects
and replays the rows it missed from the store, exactly as after a local overflow. So a
subscriber on another server sees the committed rows once each, in order, with no gap.

Wire format of one payload (ASCII: JSON with ``ensure_ascii``)::

    <origin> <n> <part>/<parts> <body-slice>

where the body slices of parts ``0..parts-1`` joined are one JSON object: ``{"c": cid,
"f": frame-json}`` or ``{"c": cid, "p": [seq, run_id, client_message_id]}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from collections.abc import Callable
from typing import Any, Protocol, get_args

from ostinato.bus import LocalBus
from ostinato.frames import Frame, MessageCommitted
from ostinato.ids import new_id
from ostinato.store.base import Store

log = logging.getLogger("ostinato.fanout")

FRAME_CLASSES: dict[str, type[Any]] = {
    cls.__dataclass_fields__["type"].default: cls for cls in get_args(Frame)
}
BATCH = 256  # payloads per send at most
RETRY_S = 1.0  # between attempts to reconnect a lost transport


class Transport(Protocol):
    """Publishes payloads to every process and hands received ones to a callback."""

    limit: int | None  # the largest payload in bytes (None: no limit)

    async def connect(
        self, received: Callable[[str], None], lost: Callable[[BaseException | None], None]
    ) -> None:
        """Connect and subscribe; ``received`` gets each payload (own ones too), ``lost``
        is called once if the connection later breaks."""
        ...

    async def send(self, payloads: list[str]) -> None:
        """Publish ``payloads`` in order, together (one transaction where it matters)."""
        ...

    async def close(self) -> None: ...


def encode(
    origin: str, counter: int, conversation_id: str, frame: Frame, limit: int | None
) -> list[str]:
    """The payloads of one frame (more than one only if it does not fit ``limit``)."""
    if isinstance(frame, MessageCommitted):
        body: dict[str, Any] = {
            "c": conversation_id,
            "p": [frame.seq, frame.run_id, frame.client_message_id],
        }
    else:
        body = {"c": conversation_id, "f": frame.to_json()}
    text = json.dumps(body, ensure_ascii=True, separators=(",", ":"), default=str)
    head = len(origin) + 40  # "<origin> <n> <i>/<k> " with room for large numbers
    size = len(text) if limit is None else max(1, limit - head)
    parts = [text[i : i + size] for i in range(0, len(text), size)] or [""]
    return [f"{origin} {counter + i} {i}/{len(parts)} {part}" for i, part in enumerate(parts)]


def decode_frame(raw: dict[str, Any]) -> Frame | None:
    """A non-durable frame from its JSON; ``None`` for a type this version does not know
    (a newer server in a rolling deploy) or a malformed one."""
    cls = FRAME_CLASSES.get(str(raw.get("type", "")))
    if cls is None or cls is MessageCommitted:
        return None
    names = {f.name for f in dataclasses.fields(cls)}
    try:
        frame: Frame = cls(**{k: v for k, v in raw.items() if k in names})
    except TypeError:
        return None
    return frame


class Relay:
    """Attach to a bus with ``await relay.start(bus)``; ``bus.aclose()`` stops it."""

    def __init__(self, transport: Transport, store: Store, *, origin: str | None = None) -> None:
        self.transport = transport
        self.store = store
        self.origin = origin or new_id()
        self._bus: LocalBus | None = None
        self._outbox: asyncio.Queue[tuple[str, Frame]] = asyncio.Queue()
        self._inbox: asyncio.Queue[str | None] = asyncio.Queue()
        self._counter = 0
        self._seen: dict[str, int] = {}  # origin -> last n received
        self._parts: dict[str, list[str]] = {}  # origin -> parts of a cut body so far
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self.sent = 0  # payloads sent (for tests and the bench)
        self.gaps = 0  # times a gap made every local subscription replay

    async def start(self, bus: LocalBus) -> None:
        """Connect (raises if the transport cannot), then relay ``bus``'s frames."""
        await self.transport.connect(self._inbox.put_nowait, self._lost)
        self._bus = bus
        bus.relay = self
        self._tasks = [
            asyncio.create_task(self._send_loop(), name="fanout-send"),
            asyncio.create_task(self._receive_loop(), name="fanout-receive"),
        ]

    def send(self, conversation_id: str, frame: Frame) -> None:
        if not self._closing:
            self._outbox.put_nowait((conversation_id, frame))

    async def aclose(self) -> None:
        """Send what is queued (briefly), then disconnect."""
        self._closing = True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2.0):
                await self._outbox.join()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.transport.close()

    # --- sending ----------------------------------------------------------------------

    async def _send_loop(self) -> None:
        limit = self.transport.limit
        while True:
            batch = [await self._outbox.get()]
            while len(batch) < BATCH and not self._outbox.empty():
                batch.append(self._outbox.get_nowait())
            payloads: list[str] = []
            for cid, frame in batch:
                encoded = encode(self.origin, self._counter, cid, frame, limit)
                self._counter += len(encoded)
                payloads.extend(encoded)
            try:
                await self.transport.send(payloads)
                self.sent += len(payloads)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the counter moved on: receivers see the gap
                log.warning("fan-out: %d frame(s) not sent: %s", len(batch), exc)
            finally:
                for _ in batch:
                    self._outbox.task_done()

    # --- receiving --------------------------------------------------------------------

    def _lost(self, error: BaseException | None) -> None:
        if self._closing:
            return
        log.warning("fan-out: connection lost (%s); reconnecting", error)
        self._inbox.put_nowait(None)  # handled in order: drop every subscription

    async def _reconnect(self) -> None:
        while not self._closing:
            try:
                await self.transport.connect(self._inbox.put_nowait, self._lost)
                log.info("fan-out: reconnected")
                return
            except Exception as exc:
                log.warning("fan-out: cannot reconnect yet: %s", exc)
                await asyncio.sleep(RETRY_S)

    async def _receive_loop(self) -> None:
        while True:
            payload = await self._inbox.get()
            if payload is None:
                self._gap()
                await self._reconnect()
                continue
            try:
                await self._receive(payload)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("fan-out: a payload could not be handled")
                self._gap()

    def _gap(self) -> None:
        """Something may be missing: every local subscriber replays from the store."""
        self.gaps += 1
        self._seen.clear()
        self._parts.clear()
        if self._bus is not None:
            self._bus.drop()

    async def _receive(self, payload: str) -> None:
        origin, n_text, part_text, piece = payload.split(" ", 3)
        if origin == self.origin:
            return
        n = int(n_text)
        last = self._seen.get(origin)
        self._seen[origin] = n
        if last is not None and n != last + 1:
            self._gap()
            self._seen[origin] = n
        index, parts = (int(x) for x in part_text.split("/"))
        pieces = self._parts.setdefault(origin, []) if parts > 1 else []
        if parts > 1 and index != len(pieces):
            self._parts.pop(origin, None)  # a part went missing: the gap said so
            return
        pieces.append(piece)
        if index + 1 < parts:
            return
        self._parts.pop(origin, None)
        await self._deliver(json.loads("".join(pieces)))

    async def _deliver(self, body: dict[str, Any]) -> None:
        bus, cid = self._bus, str(body["c"])
        if bus is None or not bus.subscriber_count(cid):
            return  # nobody here watches it: no row read
        if "p" in body:
            seq, run_id, client_message_id = body["p"]
            rows = await self.store.list_messages(cid, after_seq=int(seq) - 1, limit=1)
            if not rows or rows[0].seq != seq:
                log.warning("fan-out: row %s of %s not found; its watchers replay", seq, cid)
                bus.drop(cid)
                return
            message = MessageCommitted(
                run_id=run_id, seq=seq, message=rows[0], client_message_id=client_message_id
            )
            bus.deliver(cid, message)
            return
        frame = decode_frame(body["f"])
        if frame is not None:
            bus.deliver(cid, frame)
