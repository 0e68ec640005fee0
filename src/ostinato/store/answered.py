"""One result per tool call: the store's rule, and how writers live with it.

A tool call is answered once (DESIGN: "exactly one result per call is a database
fact"). A call is known by its conversation, the turn whose row made it and its
tool_use id; the store keeps one key per answered call (the ``tool_results`` table's
primary key on SQLite and PostgreSQL, a set in ``MemoryStore``), written in the same
transaction as the row holding the result. A write that would answer a call a second
time is refused whole with ``AlreadyAnswered``, whose ``calls`` say which: of two
writers racing to answer one call, in one process or several, exactly one succeeds.

Every writer of results (a turn's record, its cancellation, recovery, the answers a new
message gives to what a paused conversation waited on) takes that refusal as the normal
outcome of a lost race: someone answered first, and the first answer stands.
``write_answers`` does it for them: it leaves out the results of the calls already
answered (and the finishes of their tool-call records, which the winner wrote) and
writes the rest.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ostinato.errors import AlreadyAnswered
from ostinato.messages import Message, ToolResultBlock
from ostinato.store.base import AppendMessage, FinishToolCall, Store, WriteOp
from ostinato.store.inflight import written as committed

Key = tuple[str, str]  # (the turn that made the call, its tool_use id); '' for no turn


def answer_keys(op: AppendMessage) -> list[Key]:
    """The key of each call the appended message answers, in block order."""
    default = op.turn_id or ""
    return [
        (op.call_turns.get(block.tool_use_id, default), block.tool_use_id)
        for block in op.message.blocks
        if isinstance(block, ToolResultBlock)
    ]


def refusal(taken: Iterable[str]) -> AlreadyAnswered:
    """The error for a write whose results for ``taken`` (tool_use ids) were refused."""
    calls = frozenset(taken)
    named = ", ".join(sorted(calls))
    return AlreadyAnswered(f"tool call {named} already has a result", calls)


def call_turns(
    history: Sequence[Message], calls: Iterable[str], turn_id: str | None
) -> dict[str, str]:
    """The turn whose row made each of ``calls`` (the newest such row of ``history``),
    where it is not ``turn_id``: ``AppendMessage.call_turns`` for a row answering them."""
    wanted = set(calls)
    made: dict[str, str] = {}
    for message in reversed(history):
        if not wanted:
            break
        for use in message.tool_uses:
            if use.id in wanted:
                wanted.discard(use.id)
                made[use.id] = message.turn_id or ""
    return {call: turn for call, turn in made.items() if turn != (turn_id or "")}


def without(ops: Sequence[WriteOp | None], calls: frozenset[str]) -> list[WriteOp | None]:
    """``ops`` with the results of ``calls`` left out, and the finishes of their records;
    ``None`` in place of an op with nothing left (a row that held only their results)."""
    out: list[WriteOp | None] = []
    for op in ops:
        if isinstance(op, AppendMessage) and any(
            isinstance(b, ToolResultBlock) and b.tool_use_id in calls for b in op.message.blocks
        ):
            blocks = tuple(
                b
                for b in op.message.blocks
                if not (isinstance(b, ToolResultBlock) and b.tool_use_id in calls)
            )
            if not any(isinstance(b, ToolResultBlock) for b in blocks):
                op = None
            else:
                op = dataclasses.replace(op, message=dataclasses.replace(op.message, blocks=blocks))
        elif isinstance(op, FinishToolCall) and op.tool_call_id in calls:
            op = None
        out.append(op)
    return out


@dataclass(slots=True)  # not frozen: made every step (docs/performance.md)
class Answered:
    """What ``write_answers`` wrote, for each op it was given: the op as written (less
    the results left out; ``None`` if nothing of it was) and its result (``None`` too
    if left out); and the calls someone else had answered first."""

    ops: list[WriteOp | None]
    results: list[Any]
    lost: frozenset[str]


async def write_answers(store: Store, *ops: WriteOp) -> Answered:
    """Write ``ops`` atomically, less the results of calls already answered: a lost race
    is not an error. What is left is written as one write, or not at all (any other
    error is raised as ``Store.write`` raises it). A cancel that fell during a write that
    committed carries its ``Answered`` (``store.inflight.written``)."""
    pending: list[WriteOp | None] = list(ops)
    kept: Sequence[WriteOp] = ops  # what is left to write (all of it until a race is lost)
    lost: frozenset[str] = frozenset()
    while True:
        if not kept:
            return Answered(pending, [None] * len(pending), lost)
        try:
            written = await store.write(*kept)
        except asyncio.CancelledError as cancel:  # the store says what it committed
            if (results := committed(cancel)) is not None:
                done = iter(results)
                cancel.written = Answered(  # type: ignore[attr-defined]
                    pending, [None if op is None else next(done) for op in pending], lost
                )
            raise
        except AlreadyAnswered as exc:
            if exc.calls <= lost:  # nothing left out this time: it would never end
                raise
            lost |= exc.calls
            pending = without(pending, exc.calls)
            kept = [op for op in pending if op is not None]
            continue
        if len(kept) == len(pending):  # nothing left out: one result per op, in order
            return Answered(pending, list(written), lost)
        done = iter(written)
        return Answered(pending, [None if op is None else next(done) for op in pending], lost)
