"""A turn's result as the turns route answers it (``TurnOut``): from the turn's running
task when it ends normally, or read back from the store, for a turn that was cancelled
(its task ends with ``CancelledError``, its row says ``cancelled``) and for a retry
that joins a turn an earlier request began (``server.idempotency``).

The rows of a turn, read back: the rows its opening committed (the user message, and a
tool row answering what the conversation waited on, which belongs to no turn), then
every later row of the turn, in seq order. Summary rows (compaction) are not part of
the answer, as they are not part of a live turn's result.
"""

from __future__ import annotations

import asyncio

from ostinato.errors import StoreError
from ostinato.loop.driver import TurnResult
from ostinato.messages import Message
from ostinato.server.schemas import MessageOut, TurnOut
from ostinato.store.base import Store, Turn
from ostinato.submissions import TurnHandle

PAGE = 200


def live_result(handle: TurnHandle, result: TurnResult, queued_position: int | None) -> TurnOut:
    """The answer of a turn whose task returned ``result``."""
    return TurnOut(
        turn_id=result.turn_id,
        run_id=result.run_id,
        stop_reason=result.stop_reason,
        messages=[MessageOut.of(m) for m in (*handle.rows, *result.messages)],
        metrics=result.metrics,
        error=result.error,
        queued_position=queued_position,
    )


async def finished_result(handle: TurnHandle, store: Store, queued_position: int | None) -> TurnOut:
    """The answer of a turn that has ended, whatever ended it: its task's result, or,
    when the task was cancelled (``POST /cancel``, a superseding message, shutdown),
    what the store recorded. Raises ``CancelledError`` only when the caller itself is
    cancelled."""
    try:
        return live_result(handle, await handle.result(), queued_position)
    except asyncio.CancelledError:
        if not handle.task.cancelled():
            raise  # it is this request that is being cancelled, not the turn
    after = (handle.rows[0].seq or 1) - 1 if handle.rows else 0
    turn = await handle_turn(store, handle)
    return await stored_result(store, turn, after_seq=after, queued_position=queued_position)


async def handle_turn(store: Store, handle: TurnHandle) -> Turn:
    turn = await store.get_turn(handle.turn.id)
    if turn is None or turn.status != "finished":
        raise StoreError(f"turn {handle.turn.id!r} ended but its row does not say how")
    return turn


async def stored_result(
    store: Store, turn: Turn, *, after_seq: int, queued_position: int | None
) -> TurnOut:
    """The answer of a finished ``turn``, read from the store; its rows are read after
    ``after_seq``, the conversation's last seq before the turn began."""
    assert turn.stop_reason is not None
    rows = await turn_rows(store, turn, after_seq)
    return TurnOut(
        turn_id=turn.id,
        run_id=turn.run_id,
        stop_reason=turn.stop_reason,
        messages=[MessageOut.of(m) for m in rows],
        metrics=turn.metrics,
        error=turn.error,
        queued_position=queued_position,
    )


async def turn_rows(store: Store, turn: Turn, after_seq: int) -> list[Message]:
    """The rows of ``turn`` after ``after_seq`` (see the module's docstring)."""
    found: list[Message] = []
    begun = False
    while True:
        page = await store.list_messages(turn.conversation_id, after_seq=after_seq, limit=PAGE)
        for row in page:
            if row.turn_id == turn.id:
                begun = True
                if row.metadata.get("kind") != "summary":
                    found.append(row)
            elif row.turn_id is None and not begun:
                found.append(row)  # an opening row that belongs to no turn
            elif row.turn_id is not None:
                if begun:
                    return found  # the next turn's rows
                found = []  # an earlier turn's: what came before it was not this opening
        if len(page) < PAGE:
            return found if begun else []
        after_seq = page[-1].seq or after_seq
