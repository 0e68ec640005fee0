"""A turn's record: every row it commits, committed before it is announced, and what it
still owes (tool calls without a result, tool-call records still running), so that it
always ends by answering them and recording a stop reason.

The record follows what was written, never what was meant to be: a write is booked
(its rows, the calls they open and answer) when it has committed, and a turn cancelled
while a write is in flight books what that write committed before it takes the cancel
(the store waits for the write's outcome and the cancel carries it: ``store.inflight``).
Its teardown so answers exactly the calls still open: no call left without a result,
none given a second one. A result the store refuses because the call was answered first
(``store.answered``) is a lost race: the record books the call as answered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ostinato.bus import Bus, LocalBus
from ostinato.frames import Frame, InputRequested, MessageCommitted, ToolStarted, TurnFinished
from ostinato.loop.tools import ToolRun
from ostinato.messages import Block, Message, TextBlock, ToolResultBlock, ToolUseBlock
from ostinato.store.answered import Answered, refusal, write_answers
from ostinato.store.base import (
    STATE_AFTER,
    AppendMessage,
    FinishToolCall,
    FinishTurn,
    StartToolCall,
    Store,
    ToolCallRecord,
    ToolCallStatus,
    Turn,
    TurnStopReason,
    WriteOp,
    utcnow,
)
from ostinato.store.inflight import written


class TurnRecord:
    """The rows of one turn, as written. ``history`` is what the next request is built
    from (the stored rows before the turn, then the turn's own); ``written`` holds only
    the rows this driver committed."""

    def __init__(
        self,
        store: Store,
        bus: Bus,
        turn: Turn,
        history: list[Message],
        seq: int,
        carried: Sequence[tuple[ToolUseBlock, str]] = (),
    ) -> None:
        self.store, self.bus, self.turn = store, bus, turn
        # whether a frame published now reaches anyone: a frame nobody hears is not made.
        # Only the plain ``LocalBus`` is asked; any other bus (a subclass that records what
        # is published, a sub-agent's) is taken to hear every frame.
        self.heard: Callable[[], bool] = (
            partial(bus.listened, turn.conversation_id) if type(bus) is LocalBus else _heard
        )
        self.history = history
        self.seq = seq  # the seq of the turn's newest committed row
        self.written: list[Message] = []
        self.open_calls: dict[str, ToolUseBlock] = {}  # committed tool_use without result
        self.unfinished: set[str] = set()  # tool-call records still marked running
        self.seeded: frozenset[str] = frozenset()  # the turn-zero seed calls (reads)
        self.begun: dict[str, float] = {}  # when each call started (monotonic)
        self.ended = False  # the turn's end is committed (``conclude``)
        self.so_far: dict[str, str] = {}  # what a call cut short had done (ToolContext)
        # the turn that recorded each call (a carried call's record is its earlier turn's)
        self.record_turn = {call.id: turn_id for call, turn_id in carried}
        for call, _ in carried:
            self.open_calls[call.id] = call
            self.unfinished.add(call.id)

    def emit(self, frame: Frame) -> None:
        self.bus.publish(self.turn.conversation_id, frame)

    async def commit(
        self, messages: Sequence[Message], extra: Sequence[WriteOp] = ()
    ) -> frozenset[str]:
        """Commit messages (and other ops) together, then announce the rows; the calls
        whose results were left out because they had been answered first."""
        cid, turn_id = self.turn.conversation_id, self.turn.id
        if self.record_turn:  # carried calls: the rows may answer an earlier turn's
            ops: list[WriteOp] = [
                AppendMessage(cid, m, turn_id, self._call_turns(m)) for m in messages
            ]
        else:
            ops = [AppendMessage(cid, m, turn_id) for m in messages]
        try:
            answered = await write_answers(self.store, *ops, *extra)
        except asyncio.CancelledError as cancel:  # booked if its write committed, then up
            if (committed := written(cancel)) is not None:
                self._book(committed, len(messages))
            raise
        self._book(answered, len(messages))
        return answered.lost

    def _call_turns(self, message: Message) -> dict[str, str]:
        """The earlier turns of the carried calls this row answers (``AppendMessage``)."""
        earlier = self.record_turn
        return {
            r.tool_use_id: earlier[r.tool_use_id]
            for r in message.tool_results
            if r.tool_use_id in earlier
        }

    def _book(self, written: Answered, rows: int) -> None:
        """Follow a committed write: its rows (announced), the calls they open and
        answer, the records it started and finished; calls answered first are closed."""
        for stored in written.results[:rows]:
            if stored is None:
                continue
            self.seq = stored.seq
            self.history.append(stored)
            self.written.append(stored)
            if self.heard():
                self._committed(stored)
            for block in stored.blocks:  # one pass: the calls it opens, those it answers
                if type(block) is ToolUseBlock:
                    self.open_calls[block.id] = block
                elif type(block) is ToolResultBlock:
                    self._answered(block.tool_use_id)
        for op in written.ops[rows:]:
            if isinstance(op, StartToolCall) and op.record.status == "running":
                self.unfinished.add(op.record.id)
            elif isinstance(op, FinishToolCall):
                self.unfinished.discard(op.tool_call_id)
        for call in written.lost:
            self._answered(call)

    def _committed(self, stored: Message) -> None:
        self.emit(MessageCommitted.of(self.turn.run_id, stored.seq or 0, stored))

    def _answered(self, tool_use_id: str) -> None:
        self.open_calls.pop(tool_use_id, None)
        self.unfinished.discard(tool_use_id)

    # --- tool calls ------------------------------------------------------------------

    def opened(self, calls: Sequence[ToolUseBlock], starts: Sequence[StartToolCall]) -> None:
        """The calls are committed (as tool_use blocks) and these records started (the
        seed calls, committed with the turn's start)."""
        self.seeded = self.seeded | {call.id for call in calls}
        for call in calls:
            self.open_calls[call.id] = call
        self.unfinished.update(op.record.id for op in starts if op.record.status == "running")

    def started(self, call: ToolUseBlock, category: str) -> None:
        self.begun[call.id] = time.monotonic()
        if not self.heard():
            return
        self.emit(
            ToolStarted(
                run_id=self.turn.run_id,
                seq=self.seq,
                tool_use_id=call.id,
                name=call.name,
                input=call.input,
                category=category,
            )
        )

    def finish_op(self, run: ToolRun, now: Any = None) -> FinishToolCall:
        return FinishToolCall(
            self.record_turn.get(run.call.id, self.turn.id),
            run.call.id,
            run.status,
            run.content,
            run.error is not None,
            now or utcnow(),
            run.duration_s,
            run.call.id not in self.seeded,  # a seed's read changed nothing
        )

    async def finish_one(self, run: ToolRun) -> None:
        """Record one call's finish as it happens (its result comes with the others)."""
        await self.store.write(self.finish_op(run))
        run.recorded = True
        self.unfinished.discard(run.call.id)
        if self.heard():
            self.emit(run.finished_frame(self.turn.run_id, self.seq))

    async def commit_results(
        self,
        runs: Sequence[ToolRun],
        note: str | None,
        *,
        hidden: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """One tool message with every run's result (and the decision's note, if any);
        the finishes not yet recorded ride along."""
        blocks: list[Block] = []
        unrecorded: list[ToolRun] = []
        finishes: list[WriteOp] = []
        for run in runs:  # one pass: each result, and each finish not yet recorded
            blocks.append(ToolResultBlock(run.call.id, run.content, run.error is not None))
            if run.status != "skipped" and not run.recorded:
                unrecorded.append(run)
                finishes.append(self.finish_op(run))
        if note:
            blocks.append(TextBlock(note))
        lost = await self.commit([Message("tool", tuple(blocks), hidden, metadata or {})], finishes)
        if self.heard():
            for run in unrecorded:
                if run.call.id not in lost:
                    self.emit(run.finished_frame(self.turn.run_id, self.seq))
        if lost:  # another writer (recovery, another turn) took this turn's calls over
            raise refusal(lost)

    async def answer(self, unanswered: dict[str, str], status: ToolCallStatus = "skipped") -> None:
        """Give every still-open tool call a synthetic result, so the history stays valid
        for every provider, and close the tool-call records still marked running (with
        the time they ran and what a call cut short had done so far)."""
        pending = {i: self._so_far(i, why) for i, why in unanswered.items() if i in self.open_calls}
        if not pending:
            return
        now, clock = utcnow(), time.monotonic()
        runs = [
            ToolRun(self.open_calls[i], why, clock - self.begun.get(i, clock), why, status)
            for i, why in pending.items()
            if i in self.unfinished
        ]
        closes = [self.finish_op(run, now) for run in runs]
        blocks = tuple(ToolResultBlock(i, why, is_error=True) for i, why in pending.items())
        lost = await self.commit([Message(role="tool", blocks=blocks)], closes)
        for run in runs:
            if run.call.id in self.begun and run.call.id not in lost:  # its start was
                self.emit(run.finished_frame(self.turn.run_id, self.seq))  # announced

    def cut_short(self, tool_use_id: str, text: str) -> None:
        """A call cut short had done this so far: its synthetic result will say so."""
        self.so_far[tool_use_id] = text

    def _so_far(self, tool_use_id: str, why: str) -> str:
        done = self.so_far.get(tool_use_id)
        return f"{why}; what it had done by then: {done}" if done else why

    async def answer_all(self, why: str, status: ToolCallStatus = "skipped") -> None:
        await self.answer(dict.fromkeys(self.open_calls, why), status)

    # --- the end ---------------------------------------------------------------------

    async def finish(
        self,
        reason: TurnStopReason,
        metrics: dict[str, Any],
        error: str | None = None,
        awaiting: ToolUseBlock | None = None,
        timeline: dict[str, Any] | None = None,
        extra: Sequence[WriteOp] = (),
    ) -> None:
        """Record the stop reason, the metrics and the timeline, with ``extra`` (a paused
        turn first asks for its card's answer)."""
        run_id, seq = self.turn.run_id, self.seq
        if reason == "paused" and awaiting is not None:
            self.emit(
                InputRequested(
                    run_id=run_id,
                    seq=seq,
                    tool_use_id=awaiting.id,
                    name=awaiting.name,
                    input=awaiting.input,
                )
            )
        turn = self.turn
        await self.store.write(
            FinishTurn(turn.id, turn.conversation_id, reason, utcnow(), metrics, error, timeline),
            *extra,
        )
        self._finished(seq, reason, metrics, error)

    async def conclude(
        self,
        answer: Message,
        reason: TurnStopReason,
        metrics: dict[str, Any],
        timeline: dict[str, Any] | None,
        extra: Sequence[WriteOp] = (),
    ) -> None:
        """Commit a final answer and the turn's end in one write (``extra``: the reply's
        charge), then announce the row and the end together. A cancel that comes once the
        write has committed finds the turn ended (``ended``): the end stands."""
        turn = self.turn
        end = FinishTurn(turn.id, turn.conversation_id, reason, utcnow(), metrics, None, timeline)
        try:
            await self.commit([answer], [*extra, end])
        except asyncio.CancelledError as cancel:
            if written(cancel) is not None:
                self.ended = True
                self._finished(self.seq, reason, metrics, None)
            raise
        self.ended = True
        self._finished(self.seq, reason, metrics, None)

    def _finished(
        self, seq: int, reason: TurnStopReason, metrics: dict[str, Any], error: str | None
    ) -> None:
        turn = self.turn
        self.emit(
            TurnFinished(
                run_id=turn.run_id,
                seq=seq,
                turn_id=turn.id,
                stop_reason=reason,
                state=STATE_AFTER[reason],
                metrics=metrics,
                error=error,
            )
        )


def _heard() -> bool:
    return True


def start_op(turn: Turn, call: ToolUseBlock, now: Any, waiting: bool = False) -> StartToolCall:
    """The op recording ``turn``'s call as it starts (``waiting`` for a person: a card)."""
    return StartToolCall(
        ToolCallRecord(
            id=call.id,
            conversation_id=turn.conversation_id,
            turn_id=turn.id,
            name=call.name,
            input=call.input,
            status="waiting" if waiting else "running",
            started_at=now,
        )
    )
