"""The turn driver: performs what ``decision`` decides. The only async part of the loop.

One ``TurnDriver`` runs one turn: it builds each request from the history it was given
(stored rows) plus the rows this turn commits, calls the model under a deadline, commits
every row before announcing it, runs tool calls concurrently under their deadlines, and
always ends by recording a stop reason. It knows no HTTP, no SQL and no provider.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, assert_never

from ostinato.agents import AgentConfig
from ostinato.attachments import placeholder
from ostinato.bus import Bus
from ostinato.context.keeper import ContextKeeper
from ostinato.errors import ContextTooLong, ModelError, ModelTimeout, StreamIncomplete
from ostinato.frames import (
    ErrorFrame,
    Frame,
    InputRequested,
    MessageCommitted,
    ModelRetrying,
    TextDeltaFrame,
    ThinkingDeltaFrame,
    ToolProgress,
    ToolStarted,
    TurnFinished,
)
from ostinato.loop.decision import (
    CallModel,
    Finish,
    LoopState,
    NextStep,
    RunTools,
    ToolOutcome,
    after_reply,
    after_tools,
)
from ostinato.loop.heartbeat import Heartbeat
from ostinato.loop.history import repair, unique_tool_ids
from ostinato.loop.metrics import TurnMetrics
from ostinato.loop.tools import Consent, ToolRun, run_tool
from ostinato.messages import Block, Message, TextBlock, ToolResultBlock, ToolUseBlock
from ostinato.models.assembly import MessageBuilder, ModelReply
from ostinato.models.base import (
    Model,
    ModelRequest,
    Retrying,
    TextDelta,
    ThinkingDelta,
)
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
from ostinato.tools.registry import ToolCatalog

log = logging.getLogger("ostinato.loop")

INTERRUPTED = "interrupted: the turn was cancelled before this tool call finished"
FAILED = "not run: the turn failed before this tool call could run"


@dataclass(slots=True)
class TurnResult:
    turn_id: str
    run_id: str
    stop_reason: TurnStopReason
    metrics: dict[str, Any]
    messages: list[Message] = field(default_factory=list)
    error: str | None = None


class TurnDriver:
    """Runs one turn to its end. ``history`` holds the stored rows in order, ending with
    the row that started the turn; it is repaired (``loop.history.repair``) if needed."""

    def __init__(
        self,
        *,
        store: Store,
        bus: Bus,
        model: Model,
        catalog: ToolCatalog,
        settings: AgentConfig,
        turn: Turn,
        history: Sequence[Message],
        consent: Consent | None = None,
        context: ContextKeeper | None = None,
        turn_rows: int = 1,
        owner: str | None = None,
        workdir: Path | None = None,
        carried: Sequence[tuple[ToolUseBlock, str]] = (),
        seeds: Sequence[ToolUseBlock] = (),
        tool_extras: dict[str, Any] | None = None,
        route: dict[str, Any] | None = None,
    ) -> None:
        """``carried`` are tool calls of an earlier turn this one runs first (an approval
        decided after a restart), each with the id of the turn that recorded it."""
        self.store, self.bus, self.model = store, bus, model
        self.catalog, self.settings, self.turn = catalog, settings, turn
        self.consent, self.owner, self.workdir = consent, owner, workdir
        self.history, self.tool_ids = repair(
            [placeholder(m) for m in history], running={call.id for call, _ in carried}
        )
        self.seeds = tuple(call for call in seeds if call.name in catalog.by_name)
        self.tool_extras = tool_extras or {}
        self.route = route  # recorded with the turn's metrics
        self.heartbeat = Heartbeat(self._beat, settings.heartbeat_interval)
        self.context = context
        self.prior_count = len(self.history) - turn_rows  # rows before this turn's own
        self.seq = history[-1].seq or 0 if history else 0
        self.metrics = TurnMetrics()
        self.written: list[Message] = []
        self.open_calls: dict[str, ToolUseBlock] = {}  # committed tool_use without result
        self.unfinished: set[str] = set()  # tool-call records still marked running
        self.record_turn = {call.id: turn_id for call, turn_id in carried}
        for call, _ in carried:
            self.open_calls[call.id] = call
            self.unfinished.add(call.id)
        self.carried = tuple(call for call, _ in carried)
        self.awaiting: ToolUseBlock | None = None

    # --- the loop --------------------------------------------------------------------

    async def run(self) -> TurnResult:
        state = LoopState(
            self.settings.max_model_calls,
            ui_tools=frozenset(t.name for t in self.catalog.tools if t.category == "ui"),
        )
        step: NextStep = RunTools(self.carried, {}) if self.carried else CallModel()
        try:
            if self.seeds:
                await self._seed()
            while True:
                match step:
                    case CallModel(tools_off=tools_off):
                        reply = await self._call_model(tools_off)
                        state, step = after_reply(state, reply)
                        await self._commit_reply(reply, step)
                    case RunTools(calls=calls, broken=broken, awaiting=awaiting):
                        runnable = tuple(c for c in calls if c.id != awaiting)
                        runs = await self._run_tools(runnable, broken)
                        state, step = after_tools(
                            state,
                            tuple(ToolOutcome(r.call.name, r.error) for r in runs),
                            awaiting=awaiting,
                        )
                        note = step.note if isinstance(step, CallModel) else None
                        if runs:
                            await self._commit_results(runs, note)
                    case Finish(stop_reason=reason, unanswered=unanswered):
                        await self._answer(unanswered)
                        return await self._finish(reason)
                    case _:
                        assert_never(step)
        except ModelError as exc:
            self._emit(
                ErrorFrame(
                    run_id=self.turn.run_id, seq=self.seq, code=exc.code, message=exc.message
                )
            )
            await self._answer(dict.fromkeys(self.open_calls, FAILED))
            return await self._finish("failed", error=f"{exc.code}: {exc.message}")
        except asyncio.CancelledError:
            await asyncio.shield(self._teardown_cancelled())
            raise
        except Exception as exc:  # ours (e.g. the store refused a write): never hang the turn
            return await self._fail_unexpectedly(exc)

    async def _fail_unexpectedly(self, exc: Exception) -> TurnResult:
        """Record ``failed`` for an error that is nobody's business but ours, so the
        conversation does not stay ``running``; if even that cannot be written (the store
        is down), the error goes up and recovery closes the turn at the next start."""
        log.exception("turn %s failed unexpectedly", self.turn.id)
        message = f"{type(exc).__name__}: {exc}"[:500]
        self._emit(
            ErrorFrame(
                run_id=self.turn.run_id, seq=self.seq, code="internal_error", message=message
            )
        )
        try:
            await self._answer(dict.fromkeys(self.open_calls, FAILED))
            return await self._finish("failed", error=f"internal_error: {message}")
        except Exception:
            raise exc from None

    async def _teardown_cancelled(self) -> None:
        await self._answer(dict.fromkeys(self.open_calls, INTERRUPTED), "interrupted")
        await self._finish("cancelled")

    # --- effects ---------------------------------------------------------------------

    def _emit(self, frame: Frame) -> None:
        self.bus.publish(self.turn.conversation_id, frame)

    def _request(self, tools_off: bool) -> ModelRequest:
        return ModelRequest(
            system=self.settings.system_prompt,
            messages=tuple(self.history),
            # The wrap-up call keeps the definitions (the history refers to them, and the
            # prompt prefix stays cacheable) and forbids their use.
            tools=self.catalog.definitions,
            tool_choice="none" if tools_off else "auto",
            max_tokens=self.settings.max_tokens,
        )

    async def _call_model(self, tools_off: bool) -> ModelReply:
        """One model call. Over the model's window (by the estimate, or by the provider's
        word) the history is compacted and the request rebuilt, once."""
        request = self._request(tools_off)
        compacted = False
        if self.context is not None and self.context.over_budget(self, request):
            compacted = await self.context.compact(self)
            request = self._request(tools_off) if compacted else request
        try:
            reply = await self._stream(request)
        except ContextTooLong:
            if compacted or self.context is None:
                raise
            if not await self.context.compact(self, "provider"):
                raise
            request = self._request(tools_off)
            reply = await self._stream(request)
        if self.context is not None:
            self.context.observe(self, request, reply.usage)
        return reply

    async def _stream(self, request: ModelRequest) -> ModelReply:
        builder = MessageBuilder()
        run_id = self.turn.run_id
        try:
            async with (
                asyncio.timeout(self.settings.model_timeout),
                aclosing(self.model.stream(request)) as events,
            ):
                async for event in events:
                    builder.feed(event)
                    if type(event) is TextDelta:
                        self._emit(TextDeltaFrame(run_id=run_id, seq=self.seq, text=event.text))
                    elif type(event) is ThinkingDelta and event.text:
                        self._emit(ThinkingDeltaFrame(run_id=run_id, seq=self.seq, text=event.text))
                    elif type(event) is Retrying:
                        self._emit(
                            ModelRetrying(
                                run_id=run_id,
                                seq=self.seq,
                                attempt=event.attempt,
                                delay_s=event.delay,
                                error=event.error,
                            )
                        )
        except TimeoutError:
            raise ModelTimeout(
                f"the model call passed its {self.settings.model_timeout:g} s deadline"
            ) from None
        if builder.stop_reason is None:
            raise StreamIncomplete("the model's stream ended without its final event")
        reply = unique_tool_ids(builder.finish(), self.tool_ids)
        self.metrics.model_call(reply.usage)
        return reply

    async def _commit(self, messages: Sequence[Message], extra: Sequence[WriteOp] = ()) -> None:
        """Commit messages (and other ops) together, then announce the rows."""
        cid, turn_id = self.turn.conversation_id, self.turn.id
        ops: list[WriteOp] = [AppendMessage(cid, m, turn_id) for m in messages]
        results = await self.store.write(*ops, *extra)
        for stored in results[: len(messages)]:
            self.seq = stored.seq
            self.history.append(stored)
            self.written.append(stored)
            self._emit(MessageCommitted(run_id=self.turn.run_id, seq=stored.seq, message=stored))

    async def _commit_reply(self, reply: ModelReply, step: NextStep) -> None:
        message = reply.message
        if isinstance(step, Finish) and not reply.tool_uses:
            message = Message(
                role="assistant",
                blocks=message.blocks,
                metadata={"metrics": self.metrics.snapshot(), "stop_reason": step.stop_reason},
            )
        elif isinstance(step, RunTools) and step.awaiting is not None:
            # The card is part of the row, so it survives a reload and shows in /messages.
            message = Message("assistant", message.blocks, metadata={"awaiting": step.awaiting})
            self.awaiting = next(c for c in step.calls if c.id == step.awaiting)
        if not message.blocks:
            # An empty reply is still a reply: keep the row so the turn has its answer.
            message = Message(role="assistant", blocks=(TextBlock(""),), metadata=message.metadata)
        starts: list[WriteOp] = []
        if isinstance(step, RunTools):
            now = utcnow()
            for call in step.calls:
                if call.id not in step.broken:
                    waiting = call.id == step.awaiting
                    starts.append(StartToolCall(self._record(call, now, waiting)))
        await self._commit([message], starts)
        for call in reply.tool_uses:
            self.open_calls[call.id] = call
        self.unfinished.update(
            op.record.id
            for op in starts
            if isinstance(op, StartToolCall) and op.record.status == "running"
        )
        if isinstance(step, RunTools):
            for call in step.calls:
                if call.id not in step.broken and call.id != step.awaiting:
                    tool = self.catalog.by_name.get(call.name)
                    self._started(call, tool.category if tool else "action")

    def _started(self, call: ToolUseBlock, category: str) -> None:
        self._emit(
            ToolStarted(
                run_id=self.turn.run_id,
                seq=self.seq,
                tool_use_id=call.id,
                name=call.name,
                input=call.input,
                category=category,
            )
        )

    def _record(self, call: ToolUseBlock, now: Any, waiting: bool = False) -> ToolCallRecord:
        return ToolCallRecord(
            id=call.id,
            conversation_id=self.turn.conversation_id,
            turn_id=self.turn.id,
            name=call.name,
            input=call.input,
            status="waiting" if waiting else "running",
            started_at=now,
        )

    async def _tool(self, call: ToolUseBlock) -> ToolRun:
        def progress(text: str) -> None:
            self.heartbeat.touch(call.id)
            self._progress(call.id, call.name, text, False)

        self.heartbeat.start(call.id, call.name)
        try:
            return await run_tool(
                call,
                self.catalog,
                self.turn,
                consent=self.consent,
                owner=self.owner,
                workdir=self.workdir,
                progress=progress,
                seq=self.seq,
                extras=self.tool_extras,
            )
        finally:
            self.heartbeat.done(call.id)

    def _progress(self, tool_use_id: str, name: str, text: str, heartbeat: bool) -> None:
        self._emit(
            ToolProgress(
                run_id=self.turn.run_id,
                seq=self.seq,
                tool_use_id=tool_use_id,
                name=name,
                text=text,
                heartbeat=heartbeat,
            )
        )

    def _beat(self, tool_use_id: str, name: str, seconds: float) -> None:
        self._progress(tool_use_id, name, f"still running ({seconds:.0f} s)", True)

    async def _run_tools(
        self, calls: tuple[ToolUseBlock, ...], broken: dict[str, str]
    ) -> list[ToolRun]:
        """Run the calls concurrently; results come back in call order.

        Each finish is written as it happens; the last one rides along with the results
        message, since both happen at that moment.
        """
        if len(calls) == 1 and not broken:  # the common case: no task to spawn
            run = await self._tool(calls[0])
            self.metrics.tool_call(run.call.name)
            return [run]
        runs: dict[str, ToolRun] = {}
        tasks: set[asyncio.Task[ToolRun]] = set()
        for call in calls:
            if call.id in broken:
                runs[call.id] = ToolRun(call, broken[call.id], 0.0, broken[call.id], "skipped")
            else:
                tasks.add(asyncio.ensure_future(self._tool(call)))
        pending = tasks
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    run = task.result()
                    runs[run.call.id] = run
                    self.metrics.tool_call(run.call.name)
                    if pending:
                        await self.store.write(self._finish_op(run))
                        run.recorded = True
                        self.unfinished.discard(run.call.id)
                        self._emit(run.finished_frame(self.turn.run_id, self.seq))
        finally:
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        return [runs[call.id] for call in calls]

    def _finish_op(self, run: ToolRun) -> FinishToolCall:
        return FinishToolCall(
            self.record_turn.get(run.call.id, self.turn.id),
            run.call.id,
            run.status,
            run.content,
            run.error is not None,
            utcnow(),
            run.duration_s,
        )

    async def _seed(self) -> None:
        """Turn-zero seeds: real tool calls (a memory recall, one read per attachment) run
        before the first model call; the call and its results are hidden ``read`` rows
        of the turn's working set."""
        now = utcnow()
        starts = [StartToolCall(self._record(call, now)) for call in self.seeds]
        seed = Message("assistant", self.seeds, hidden=True, metadata={"seed": True})
        await self._commit([seed], starts)
        for call in self.seeds:
            self.open_calls[call.id] = call
            self.unfinished.add(call.id)
            self._started(call, "read")
        runs = await self._run_tools(self.seeds, {})
        await self._commit_results(runs, None, hidden=True)

    async def _commit_results(
        self, runs: list[ToolRun], note: str | None, *, hidden: bool = False
    ) -> None:
        blocks: list[Block] = [
            ToolResultBlock(r.call.id, r.content, is_error=r.error is not None) for r in runs
        ]
        if note:
            blocks.append(TextBlock(note))
        unrecorded = [r for r in runs if r.status != "skipped" and not r.recorded]
        await self._commit(
            [Message(role="tool", blocks=tuple(blocks), hidden=hidden)],
            [self._finish_op(r) for r in unrecorded],
        )
        for run in runs:
            self.open_calls.pop(run.call.id, None)
            self.unfinished.discard(run.call.id)
        for run in unrecorded:
            self._emit(run.finished_frame(self.turn.run_id, self.seq))

    async def _answer(self, unanswered: dict[str, str], status: ToolCallStatus = "skipped") -> None:
        """Give every still-open tool call a synthetic result, so the history stays valid
        for every provider, and close the tool-call records still marked running."""
        pending = {i: why for i, why in unanswered.items() if i in self.open_calls}
        if not pending:
            return
        now = utcnow()
        closes = [
            FinishToolCall(self.record_turn.get(i, self.turn.id), i, status, why, True, now, 0.0)
            for i, why in pending.items()
            if i in self.unfinished
        ]
        blocks = tuple(ToolResultBlock(i, why, is_error=True) for i, why in pending.items())
        await self._commit([Message(role="tool", blocks=blocks)], closes)
        for tool_use_id in pending:
            self.open_calls.pop(tool_use_id, None)
            self.unfinished.discard(tool_use_id)

    async def _finish(self, reason: TurnStopReason, error: str | None = None) -> TurnResult:
        self.heartbeat.stop()
        metrics = self.metrics.snapshot()
        if self.route is not None:
            metrics["route"] = self.route
        if reason == "paused" and self.awaiting is not None:
            self._emit(
                InputRequested(
                    run_id=self.turn.run_id,
                    seq=self.seq,
                    tool_use_id=self.awaiting.id,
                    name=self.awaiting.name,
                    input=self.awaiting.input,
                )
            )
        await self.store.write(
            FinishTurn(self.turn.id, self.turn.conversation_id, reason, utcnow(), metrics, error)
        )
        self._emit(
            TurnFinished(
                run_id=self.turn.run_id,
                seq=self.seq,
                turn_id=self.turn.id,
                stop_reason=reason,
                state=STATE_AFTER[reason],
                metrics=metrics,
                error=error,
            )
        )
        return TurnResult(self.turn.id, self.turn.run_id, reason, metrics, self.written, error)
