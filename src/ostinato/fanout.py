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
from dataclasses import dataclass
from typing import Any, Protocol, get_args

from ostinato.bus import LocalBus
from ostinato.frames import Frame, MessageCommitted
from ostinato.ids import new_id
from ostinato.store.base import Store
from ostinato.store.tree import WHOLE

log = logging.getLogger("ostinato.fanout")

FRAME_CLASSES: dict[str, type[Any]] = {
    cls.__dataclass_fields__["type"].default: cls for cls in get_args(Frame)
}
BATCH = 256  # payloads per send at most
# A send waits this long for more frames when the first is alone: a turn publishes its
# frames a few at a time, each after a commit (a round trip or two apart), and each send
# is a round trip of its own (a NOTIFY: about 0.1 ms of the server's CPU), so a turn's
# seven sends become two or three. Under load the outbox is never empty: no wait at all.
GATHER_S = 0.002
RETRY_S = 1.0  # between attempts to reconnect a lost transport
PRESENCE_S = 0.25  # how long a process waits for another to say it watches a conversation


class Transport(Protocol):
    """Publishes payloads to every process and hands received ones to a callback."""

    limit: int | None  # the largest payload in bytes (None: no limit)

    async def connect(
        self, received: Callable[[str], None], lost: Callable[[BaseException | None], None]
    ) -> None:
        """Connect and subscribe; ``received`` gets each payload (one's own may come
        too), ``lost`` is called once if the connection later breaks."""
        ...

    async def send(self, payloads: list[str]) -> None:
        """Publish ``payloads`` in order, together (one transaction where it matters)."""
        ...

    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Command:
    """A command for the other processes (``LocalBus.command``)."""

    kind: str
    data: dict[str, Any]


def encode(
    origin: str, counter: int, conversation_id: str, item: Frame | Command, limit: int | None
) -> list[str]:
    """The payloads of one frame or command (more than one only if it does not fit
    ``limit``)."""
    body: dict[str, Any] = {"c": conversation_id}
    if isinstance(item, Command):
        body.update(k=item.kind, d=item.data)
    elif isinstance(item, MessageCommitted):
        body["p"] = [item.seq, item.run_id, item.client_message_id]
    else:
        body["f"] = item.to_json()
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
        self._outbox: asyncio.Queue[tuple[str, Frame | Command]] = asyncio.Queue()
        self._inbox: asyncio.Queue[str | None] = asyncio.Queue()
        self._counter = 0
        self._seen: dict[str, int] = {}  # origin -> last n received
        self._parts: dict[str, list[str]] = {}  # origin -> parts of a cut body so far
        self._tasks: list[asyncio.Task[None]] = []
        self._asks: dict[str, asyncio.Future[bool]] = {}  # presence questions in flight
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

    def command(self, kind: str, conversation_id: str, data: dict[str, Any]) -> None:
        if not self._closing:
            self._outbox.put_nowait((conversation_id, Command(kind, data)))

    async def watched_elsewhere(self, conversation_id: str) -> bool:
        """Whether a surface on another process watches the conversation: asks them all,
        and waits ``PRESENCE_S`` at most for the first to say so."""
        ask = new_id()
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._asks[ask] = answer
        self.command("who", conversation_id, {"q": ask})
        try:
            return await asyncio.wait_for(answer, PRESENCE_S)
        except TimeoutError:
            return False
        finally:
            self._asks.pop(ask, None)

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
            if self._outbox.empty() and not self._closing:
                await asyncio.sleep(GATHER_S)  # what comes meanwhile goes with it
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
            payloads = [await self._inbox.get()]
            while len(payloads) < BATCH and not self._inbox.empty():
                payloads.append(self._inbox.get_nowait())
            bodies: list[dict[str, Any]] = []
            for payload in payloads:
                if payload is None:
                    await self._deliver_all(bodies)
                    bodies = []
                    self._gap()
                    await self._reconnect()
                    continue
                try:
                    gap, body = self._parse(payload)
                except Exception:
                    log.exception("fan-out: a payload could not be read")
                    gap, body = True, None
                if gap:  # what came before it is delivered first
                    await self._deliver_all(bodies)
                    bodies = []
                    self._replay_all()
                if body is not None:
                    bodies.append(body)
            await self._deliver_all(bodies)

    def _gap(self) -> None:
        """Something may be missing: every local subscriber replays from the store."""
        self._seen.clear()
        self._parts.clear()
        self._replay_all()

    def _replay_all(self) -> None:
        self.gaps += 1
        if self._bus is not None:
            self._bus.drop()
            self._bus.run_command("resync", "", {})  # caches re-read what they keep

    def _parse(self, payload: str) -> tuple[bool, dict[str, Any] | None]:
        """Whether a gap comes before ``payload`` (its origin's counter skipped), and its
        body once whole (None: another's part to come, one's own, or a frame of a
        conversation nobody here watches, skipped before its JSON is read)."""
        origin, n_text, part_text, piece = payload.split(" ", 3)
        if origin == self.origin:
            return False, None
        n = int(n_text)
        last = self._seen.get(origin)
        gap = last is not None and n != last + 1
        if gap:  # the caller makes every subscriber replay; counting starts afresh
            self._seen.clear()
            self._parts.clear()
        self._seen[origin] = n
        index, parts = (int(x) for x in part_text.split("/"))
        if parts == 1:
            return gap, None if self._unwatched(piece) else json.loads(piece)
        pieces = self._parts.setdefault(origin, [])
        if index != len(pieces):
            self._parts.pop(origin, None)  # a part went missing: the gap says so
            return gap, None
        pieces.append(piece)
        if index + 1 < parts:
            return gap, None
        self._parts.pop(origin, None)
        return gap, json.loads("".join(pieces))

    def _unwatched(self, body: str) -> bool:
        """A frame or row position (not a command) of a conversation with no subscriber
        here: ``body`` is ``{"c":"<id>","f"...`` or ``{"c":"<id>","p"...`` (``encode``)."""
        end = body.find('"', 6)
        if not body.startswith('{"c":"') or end < 0 or body[end + 1 : end + 5] == ',"k"':
            return False
        if "\\" in body[6:end]:
            return False  # an escaped character in the id: read it whole
        bus = self._bus
        return bus is not None and not bus.subscriber_count(body[6:end])

    async def _deliver_all(self, bodies: list[dict[str, Any]]) -> None:
        """Deliver in arrival order; the rows of every position among them are read first,
        one read per conversation, those of different conversations at once."""
        bus = self._bus
        if bus is None or not bodies:
            return
        try:
            spans: dict[str, tuple[int, int]] = {}
            for body in bodies:
                if "p" in body and bus.subscriber_count(cid := str(body["c"])):
                    seq = int(body["p"][0])
                    low, high = spans.get(cid, (seq, seq))
                    spans[cid] = (min(low, seq), max(high, seq))
            rows = await self._rows(spans)
            for body in bodies:
                self._deliver(bus, body, rows)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("fan-out: frames could not be delivered")
            self._gap()

    async def _rows(self, spans: dict[str, tuple[int, int]]) -> dict[tuple[str, int], Any]:
        async def read(cid: str, low: int, high: int) -> list[Any]:
            return await self.store.list_messages(
                cid, after_seq=low - 1, limit=high - low + 1, branch=WHOLE
            )

        found = await asyncio.gather(*(read(cid, *span) for cid, span in spans.items()))
        return {(cid, row.seq): row for cid, got in zip(spans, found, strict=True) for row in got}

    def _deliver(
        self, bus: LocalBus, body: dict[str, Any], rows: dict[tuple[str, int], Any]
    ) -> None:
        cid = str(body["c"])
        if "k" in body:
            self._command(bus, cid, str(body["k"]), body.get("d") or {})
            return
        if not bus.subscriber_count(cid):
            return  # nobody here watches it
        if "p" in body:
            seq, run_id, client_message_id = body["p"]
            row = rows.get((cid, seq))
            if row is None:
                log.warning("fan-out: row %s of %s not found; its watchers replay", seq, cid)
                bus.drop(cid)
                return
            message = MessageCommitted(
                run_id=run_id, seq=seq, message=row, client_message_id=client_message_id
            )
            bus.deliver(cid, message)
            return
        frame = decode_frame(body["f"])
        if frame is not None:
            bus.deliver(cid, frame)

    def _command(self, bus: LocalBus, cid: str, kind: str, data: dict[str, Any]) -> None:
        """Presence is answered here (``who`` / ``here``); the rest is the bus's."""
        if kind == "who":
            if bus.subscriber_count(cid):
                self.command("here", cid, {"q": data.get("q")})
        elif kind == "here":
            answer = self._asks.get(str(data.get("q")))
            if answer is not None and not answer.done():
                answer.set_result(True)
        else:
            bus.run_command(kind, cid, data)
