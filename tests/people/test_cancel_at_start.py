"""A cancel that lands the moment a turn begins still ends the turn cleanly.

A task cancelled before its first step never runs its body, so the turn's teardown
(``cancelled`` recorded, the conversation released) would be skipped; the runtime lets a
turn's task start before anyone can reach it."""

from __future__ import annotations

import asyncio

from ostinato.errors import Conflict
from ostinato.models.scripted import Step, text_step
from tests.loop.harness import Harness


async def test_a_cancel_at_the_first_moment_still_records_the_turn_cancelled() -> None:
    h = Harness(Step(text_step("never shown").events, delay=0.05))
    cid = await h.conversation()

    async def cancel_as_soon_as_possible() -> str | None:
        for _ in range(10_000):  # the first cancel that finds a running turn
            try:
                return (await h.runtime.cancel(cid)).cancelled_turn
            except Conflict:
                await asyncio.sleep(0)
        raise AssertionError("no turn to cancel")

    cancelling = asyncio.ensure_future(cancel_as_soon_as_possible())
    await asyncio.sleep(0)
    submission = await h.runtime.submit(cid, "hello")
    cancelled = await cancelling
    handle = await submission.handle()
    assert cancelled == handle.turn.id
    turn = await h.store.get_turn(handle.turn.id)
    assert turn is not None and turn.status == "finished" and turn.stop_reason == "cancelled"
    conversation = await h.store.get_conversation(cid)
    assert conversation is not None and conversation.state == "idle"
    assert h.bus.types()[-1] == "turn.finished"
