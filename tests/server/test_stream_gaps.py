"""A conversation stream fills a gap from the store: rows committed that no frame
announced (a server that died between its commit and its frame, rows another server's
recovery wrote) are streamed, in order and once, before the frame that shows them."""

from __future__ import annotations

import asyncio

from ostinato.bus import LocalBus
from ostinato.frames import Frame, MessageCommitted, TurnFinished
from ostinato.messages import Message, TextBlock
from ostinato.server.streams import Live, conversation_frames
from ostinato.store.base import AppendMessage, Conversation, CreateConversation, utcnow
from ostinato.store.memory import MemoryStore


async def _append(store: MemoryStore, cid: str, text: str) -> Message:
    (row,) = await store.write(AppendMessage(cid, Message("user", (TextBlock(text),))))
    assert isinstance(row, Message)
    return row


async def test_rows_no_frame_announced_are_streamed_before_the_next_frame() -> None:
    store, bus = MemoryStore(), LocalBus()
    cid = "c1"
    await store.write(CreateConversation(Conversation(cid, "idle", utcnow(), utcnow())))
    first = await _append(store, cid, "one")
    live = Live(ping_interval=10, closing=asyncio.Event())
    frames = conversation_frames(bus.subscribe(cid), store, cid, live, after_seq=0)
    seen: list[Frame] = []
    seen.append(await anext(frames))  # the replay of row one
    await _append(store, cid, "two")  # committed, never announced
    await _append(store, cid, "three")
    fourth = await _append(store, cid, "four")
    bus.publish(cid, MessageCommitted(run_id="r", seq=fourth.seq or 0, message=fourth))
    bus.publish(cid, MessageCommitted(run_id="r", seq=fourth.seq or 0, message=fourth))
    bus.publish(
        cid,
        TurnFinished(
            run_id="r", seq=fourth.seq or 0, turn_id="t", stop_reason="end_turn", state="idle"
        ),
    )
    async with asyncio.timeout(5):
        async for frame in frames:
            if frame is not None:
                seen.append(frame)
            if isinstance(frame, TurnFinished):
                break
    await frames.aclose()
    rows = [f.message.seq for f in seen if isinstance(f, MessageCommitted)]
    assert rows == [first.seq, 2, 3, 4]  # each once, in order, the gap filled
