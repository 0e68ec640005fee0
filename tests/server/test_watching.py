"""``streams.watching``: a stream's ticket and subscription, given back together."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ostinato.bus import LocalBus
from ostinato.server.auth.caller import LOCAL
from ostinato.server.streams import Live, watching


class _Guard:
    def __init__(self) -> None:
        self.open_tickets: set[object] = set()

    async def open(self, caller: Any) -> Any:
        ticket = type("Ticket", (), {"revoked": asyncio.Event()})()
        self.open_tickets.add(ticket)
        return ticket

    def close(self, ticket: Any) -> None:
        self.open_tickets.remove(ticket)


async def test_a_failed_setup_gives_both_back_and_a_made_stream_keeps_them() -> None:
    guard, bus = _Guard(), LocalBus()
    base = Live(15.0, asyncio.Event())
    with pytest.raises(RuntimeError):
        async with watching(guard, bus, LOCAL, "c1", base):  # type: ignore[arg-type]
            raise RuntimeError("setting up the stream failed")
    assert guard.open_tickets == set() and bus.subscriber_count("c1") == 0
    async with watching(guard, bus, LOCAL, "c1", base) as kept:  # type: ignore[arg-type]
        pass
    assert len(guard.open_tickets) == 1 and bus.subscriber_count("c1") == 1
    assert kept.live.revoked is kept.ticket.revoked
    kept.close()
    assert guard.open_tickets == set() and bus.subscriber_count("c1") == 0
