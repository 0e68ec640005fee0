"""Control of a turn that runs on another server process (issue 16).

With several servers on one database, a request can reach one server while the turn it
is about runs on another. The durable part is always written to the store first (an
approval's decision is its row); then a command goes to every other process through the
bus's relay (``LocalBus.command``), and the one running the turn acts on it:

- ``cancel``: the process whose worker runs the conversation's turn cancels it; the
  sender waits for that turn's ``turn.finished`` (the fan-out brings it) so that, as on
  one server, the cancel returns after the turn's teardown;
- ``decided``: the process where the turn waits for that approval reads the decision
  from the store and the turn goes on (``ConsentGate``). A waiting turn also re-reads
  its approval every ``RECHECK_S`` while a relay is attached, so a command lost with a
  dropped connection costs a delay, never the decision.
"""

from __future__ import annotations

import asyncio
import contextlib

from ostinato.bus import LocalBus
from ostinato.frames import TurnFinished
from ostinato.store.base import Store
from ostinato.store.tree import WHOLE

CANCEL_WAIT_S = 15.0  # how long a cancel waits for the other server's teardown
RECHECK_S = 2.0  # how often a turn waiting on an approval re-reads it (with a relay)


async def cancel_elsewhere(store: Store, bus: LocalBus, conversation_id: str) -> str | None:
    """Cancel the conversation's turn running on another process; its id, or None if no
    turn runs (or no relay connects this process to others)."""
    if bus.relay is None:
        return None
    running = [t for t in await store.list_turns(conversation_id) if t.status == "running"]
    if not running:
        return None
    turn = running[-1]
    async with bus.subscribe(conversation_id) as frames:
        bus.command("cancel", conversation_id, {"turn": turn.id})
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CANCEL_WAIT_S):
                async for frame in frames:
                    if isinstance(frame, TurnFinished) and frame.turn_id == turn.id:
                        break
    return turn.id


async def announce_closed(store: Store, bus: LocalBus, turn_ids: list[str]) -> None:
    """Tell every surface that recovery closed these turns (a gone server's): a
    ``turn.finished`` carrying the conversation's last seq, so a stream first reads the
    rows recovery wrote, which no frame announced (``server.streams``)."""
    for turn_id in turn_ids:
        turn = await store.get_turn(turn_id)
        conversation = await store.get_conversation(turn.conversation_id) if turn else None
        if turn is None or conversation is None:
            continue
        rows = await store.list_messages(turn.conversation_id, branch=WHOLE)
        seq = rows[-1].seq or 0 if rows else 0
        bus.publish(
            turn.conversation_id,
            TurnFinished(
                run_id=turn.run_id,
                seq=seq,
                turn_id=turn.id,
                stop_reason=turn.stop_reason or "interrupted",
                state=conversation.state,
            ),
        )
