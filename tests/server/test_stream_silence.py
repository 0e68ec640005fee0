"""The stream's silence timer (``server.streams._Silence``): one timer a stream, moved on
lazily, done once ``seconds`` pass with nothing heard."""

from __future__ import annotations

import asyncio

from ostinato.server.streams import _Silence


async def test_the_timer_waits_out_what_was_heard_after_it_was_set() -> None:
    silence = _Silence(60.0)
    loop = asyncio.get_running_loop()
    silence._check()  # fired early (something was heard since): waits the rest
    assert not silence.over.done() and silence._timer is not None
    silence._until = loop.time() - 1  # the interval passed with nothing heard
    silence._check()
    assert silence.over.done() and silence._timer is None
    silence.heard()  # a ping or a frame went out: a new silence begins
    assert not silence.over.done() and silence._timer is not None
    silence.stop()
    assert silence._timer is None


async def test_it_is_over_after_its_seconds() -> None:
    silence = _Silence(0.01)
    await asyncio.wait_for(silence.over, 5)
    silence.heard()
    await asyncio.wait_for(silence.over, 5)
    silence.stop()
