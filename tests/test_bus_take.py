"""``Subscription.take``: a waiting frame without awaiting (the SSE path's fast path),
``None`` when none waits, and the end (closed or overflowed) left for ``__anext__``."""

from __future__ import annotations

import pytest

from ostinato.bus import BacklogOverflow, LocalBus
from ostinato.frames import TextDeltaFrame


def _delta(seq: int) -> TextDeltaFrame:
    return TextDeltaFrame(run_id="r", seq=seq, text=f"t{seq}")


async def test_take_returns_waiting_frames_in_order_then_none() -> None:
    bus = LocalBus()
    subscription = bus.subscribe("c")
    assert subscription.take() is None
    bus.publish("c", _delta(1))
    bus.publish("c", _delta(2))
    assert [subscription.take(), subscription.take()] == [_delta(1), _delta(2)]
    assert subscription.take() is None
    subscription.close()


async def test_the_end_is_left_for_anext() -> None:
    bus = LocalBus(max_backlog=1)
    subscription = bus.subscribe("c")
    bus.publish("c", _delta(1))
    bus.publish("c", _delta(2))  # over the backlog: the subscription ends
    assert subscription.take() == _delta(1)
    assert subscription.take() is None
    assert subscription.take() is None  # still there, for __anext__
    with pytest.raises(BacklogOverflow):
        await subscription.__anext__()
