"""What a stream waits on between frames (``server.stream_wake``, ``server.streams``):
one silence timer a stream, moved on lazily, over once ``seconds`` pass with nothing
heard; one bell that a frame, the server closing, the turn beginning or the silence
rings; and no task of its own reading the subscription while it waits."""

from __future__ import annotations

import asyncio
from contextlib import aclosing

from ostinato.bus import BacklogOverflow, LocalBus
from ostinato.frames import TextDeltaFrame
from ostinato.server.stream_wake import Bell, Silence
from ostinato.server.streams import Live, _Closing, subscription_frames
from ostinato.server.streams import _frames as frames_of


async def test_the_timer_waits_out_what_was_heard_after_it_was_set() -> None:
    rung: list[str] = []
    silence = Silence(60.0, lambda: rung.append("ring"))
    loop = asyncio.get_running_loop()
    silence._check()  # fired early (something was heard since): waits the rest
    assert not silence.over and silence._timer is not None and not rung
    silence._until = loop.time() - 1  # the interval passed with nothing heard
    silence._check()
    assert silence.over and silence._timer is None and rung == ["ring"]
    silence.heard()  # a ping or a frame went out: a new silence begins
    assert not silence.over and silence._timer is not None
    silence.stop()
    assert silence._timer is None


async def test_it_is_over_after_its_seconds() -> None:
    bell = Bell(asyncio.get_running_loop())
    silence = Silence(0.01, bell.ring)
    await asyncio.wait_for(bell.wait(), 5)
    assert silence.over
    silence.heard()
    await asyncio.wait_for(bell.wait(), 5)
    assert silence.over
    silence.stop()


async def test_a_ring_ends_the_wait_and_one_while_nobody_waits_is_not_kept() -> None:
    bell = Bell(asyncio.get_running_loop())
    bell.ring()  # nobody waits: nothing is kept
    waiting = asyncio.ensure_future(bell.wait())
    await asyncio.sleep(0)
    assert not waiting.done()
    bell.ring()
    bell.ring()  # a second ring changes nothing
    await asyncio.wait_for(waiting, 5)


def _delta(seq: int) -> TextDeltaFrame:
    return TextDeltaFrame(run_id="r", seq=seq, text=f"t{seq}")


async def test_a_waiting_stream_holds_no_task_reading_its_subscription() -> None:
    bus = LocalBus()
    subscription = bus.subscribe("c")
    live = Live(ping_interval=60.0, closing=asyncio.Event())
    async with aclosing(frames_of(subscription, live)) as frames:
        reading = asyncio.ensure_future(frames.__anext__())
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        tasks = asyncio.all_tasks() - {asyncio.current_task(), reading}
        # the stream's own tasks: the wait for the server's closing, nothing per frame
        assert len(tasks) == 1, tasks
        bus.publish("c", _delta(1))
        bus.publish("c", _delta(2))
        assert await asyncio.wait_for(reading, 5) == _delta(1)
        assert await frames.__anext__() == _delta(2)  # waiting: no wait at all
        live.closing.set()
        try:
            await asyncio.wait_for(frames.__anext__(), 5)
            raise AssertionError("the stream went on after the server closed")
        except _Closing:
            pass
    assert subscription.bell is None


async def test_a_stream_pings_in_silence_and_ends_as_its_subscription_does() -> None:
    bus = LocalBus()
    subscription = bus.subscribe("c")
    live = Live(ping_interval=0.01, closing=asyncio.Event())
    seen = []
    async with aclosing(subscription_frames(subscription, live)) as frames:
        assert await asyncio.wait_for(frames.__anext__(), 5) is None  # a ping
        bus.publish("c", _delta(3))
        seen.append(await asyncio.wait_for(frames.__anext__(), 5))
        subscription.overflow()
        seen.extend([frame async for frame in frames])
    assert seen[0] == _delta(3)
    assert [f.type for f in seen[1:] if f is not None] == ["error"]
    assert [f.code for f in seen[1:] if f is not None] == ["overflow"]  # type: ignore[attr-defined]


async def test_poll_raises_the_end_as_the_iterator_does() -> None:
    bus = LocalBus()
    subscription = bus.subscribe("c")
    assert subscription.poll() is None
    bus.publish("c", _delta(1))
    subscription.overflow()
    assert subscription.poll() == _delta(1)
    for _ in range(2):  # the end stays the end
        try:
            subscription.poll()
            raise AssertionError("no end")
        except BacklogOverflow:
            pass
