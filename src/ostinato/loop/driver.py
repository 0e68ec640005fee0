"""The turn driver: performs what ``decision`` decides. The only async part of the loop.

One ``TurnDriver`` runs one turn: it builds each request from the history it was given
(stored rows) plus the rows this turn commits, calls the model under a deadline
(``loop.calling``), commits every row before announcing it (``loop.record``), runs tool
calls concurrently under their deadlines (``loop.running``), and always ends by
recording a stop reason. It knows no HTTP, no SQL and no provider.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, assert_never, cast

from ostinato import observe
from ostinato.agents import AgentConfig
from ostinato.bus import Bus
from ostinato.context.keeper import ContextKeeper
from ostinato.errors import AlreadyAnswered, ContextTooLong, ModelError, ToolError
from ostinato.frames import ErrorFrame, TextDiscarded
from ostinato.handover import HandedOver, mark
from ostinato.leases import claim_turn
from ostinato.loop.calling import Shown, stream_reply
from ostinato.loop.decision import (
    WRAP_UP_FALLBACK,
    CallModel,
    Finish,
    LoopState,
    NextStep,
    RunTools,
    ToolOutcome,
    after_reply,
    after_tools,
)
from ostinato.loop.history import as_requested, repair, unique_tool_ids
from ostinato.loop.record import TurnRecord, start_op
from ostinato.loop.running import ToolRunner
from ostinato.loop.seeding import Seeded, run_seeds
from ostinato.loop.spending import SpendAsker, Stopped, TurnSpend
from ostinato.loop.steering import Steering
from ostinato.loop.tools import Consent, ToolRun, validated
from ostinato.messages import Message, TextBlock, ToolUseBlock
from ostinato.models.assembly import MessageBuilder, ModelReply, spent
from ostinato.models.base import Model, ModelRequest
from ostinato.redaction import redact
from ostinato.spend.seam import GATE
from ostinato.store.base import StartToolCall, Store, Turn, TurnStopReason, utcnow
from ostinato.tools.registry import ToolCatalog

log = logging.getLogger("ostinato.loop")

INTERRUPTED = "interrupted: the turn was cancelled before this tool call finished"
FAILED = "not run: the turn failed before this tool call could run"
TAKEN_OVER = "interrupted: the turn was taken over before this tool call finished"


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

    handing: asyncio.Event | None = None  # set: hand over at the next step boundary
    steering: Steering | None = None  # takes steered messages at each step boundary
    concluded: TurnResult | None = None  # ended with its answer, in one write (``_conclude``)

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
        seeded: Seeded | None = None,
        tool_extras: dict[str, Any] | None = None,
        route: dict[str, Any] | None = None,
        position: int | None = None,
    ) -> None:
        """``carried`` are tool calls of an earlier turn this one runs first (an approval
        decided after a restart), each with the id of the turn that recorded it;
        ``seeded``, the turn-zero calls (their row is the last of ``history``); ``position``,
        the newest seq if not the last of ``history`` (a regenerate's moved branch)."""
        self.store, self.bus, self.model = store, bus, model
        self.catalog, self.settings, self.turn = catalog, settings, turn
        self.seeds = tuple(seeded.row.tool_uses) if seeded is not None else ()
        running = {call.id for call, _ in carried} | {call.id for call in self.seeds}
        repaired, self.tool_ids = repair(as_requested(history), running=running)
        start = position or (history[-1].seq or 0 if history else 0)
        self.record = TurnRecord(store, bus, turn, repaired, start, carried)
        if seeded is not None:  # committed for this turn: its own row, still open
            self.record.written.append(seeded.row)
            self.record.opened(self.seeds, seeded.starts)
        # what the turn caused, as it happens: the metrics block and the timeline
        version = route.get("version") if route else None
        self.watch = observe.turn_scope(
            turn, owner=owner, agent=settings.name, model=model.name, version=version
        )
        gate = GATE.get()  # budgets (``loop.spending``); None: not checked
        # what ``isinstance(consent, SpendAsker)`` checks, without its 13-40 us on 3.11
        asker = cast(SpendAsker, consent) if hasattr(consent, "ask_spend") else None
        self.spend = TurnSpend.of(gate, asker, turn, owner, store)  # None: not checked
        self.tools = ToolRunner(
            self.record,
            catalog,
            consent=consent,
            owner=owner,
            workdir=workdir,
            extras=tool_extras or {},
            heartbeat_interval=settings.heartbeat_interval,
        )
        self.route = self.watch.route = route  # recorded with the turn's metrics
        self.context = context
        self.prior_count = len(repaired) - turn_rows  # rows before this turn's own
        self.carried = tuple(call for call, _ in carried)
        self.awaiting: ToolUseBlock | None = None
        self.shown: Shown | None = None  # what the model call not yet committed has shown
        self.history: list[Message] = self.record.history  # changed in place, never replaced

    @property
    def seq(self) -> int:
        """The seq of the turn's newest committed row."""
        return self.record.seq

    @property
    def written(self) -> list[Message]:
        return self.record.written

    # --- the loop --------------------------------------------------------------------

    async def run(self) -> TurnResult:
        state = LoopState(
            self.settings.max_model_calls,
            ui_tools=frozenset(t.name for t in self.catalog.tools if t.category == "ui"),
        )
        step: NextStep = RunTools(self.carried, {}) if self.carried else CallModel()
        attached = self.watch.attach()
        try:
            if self.seeds:
                await run_seeds(self.record, self.tools, self.seeds)
            while True:
                match step:
                    case CallModel(tools_off=tools_off):
                        self.watch.next_step()  # (nothing when no one reads the steps)
                        state, step = await self._model_step(state, tools_off)
                    case RunTools(calls=calls, broken=broken, awaiting=awaiting):
                        if awaiting is not None:
                            calls = tuple([c for c in calls if c.id != awaiting])
                        runs = await self.tools.run(calls, broken)
                        state, step = after_tools(
                            state,
                            tuple([ToolOutcome(r.call.name, r.error) for r in runs]),
                            awaiting=awaiting,
                        )
                        note = step.note if isinstance(step, CallModel) else None
                        if runs:
                            await self._commit_results(runs, note)
                    case Finish(stop_reason=reason, unanswered=unanswered):
                        return await self._ended(reason, unanswered)
                    case _:
                        assert_never(step)
        except ModelError as exc:
            self._discard_shown("failed")
            run_id, message = self.turn.run_id, redact(exc.message)
            self.record.emit(
                ErrorFrame(run_id=run_id, seq=self.seq, code=exc.code, message=message)
            )
            await self.record.answer_all(FAILED)
            return await self._finish("failed", error=f"{exc.code}: {exc.message}")
        except asyncio.CancelledError:
            await asyncio.shield(self._teardown_cancelled())
            raise
        except AlreadyAnswered as exc:  # another writer answered this turn's calls
            return await self._taken_over(exc)
        except Exception as exc:  # ours (e.g. the store refused a write): never hang the turn
            return await self._fail_unexpectedly(exc)
        finally:
            self.watch.detach(attached)

    async def _fail_unexpectedly(self, exc: Exception) -> TurnResult:
        """Record ``failed`` for an error that is nobody's business but ours, so the
        conversation does not stay ``running``; if even that cannot be written (the store
        is down), the error goes up and recovery closes the turn at the next start."""
        if isinstance(exc, HandedOver):  # not a failure: the turn goes on elsewhere
            raise exc
        log.exception("turn %s failed unexpectedly", self.turn.id)
        message = redact(f"{type(exc).__name__}: {exc}")[:500]
        self._discard_shown("failed")
        self.record.emit(
            ErrorFrame(
                run_id=self.turn.run_id, seq=self.seq, code="internal_error", message=message
            )
        )
        try:
            await self.record.answer_all(FAILED)
            return await self._finish("failed", error=f"internal_error: {message}")
        except Exception:
            raise exc from None

    async def _taken_over(self, exc: AlreadyAnswered) -> TurnResult:
        """Someone else answered calls this turn ran (recovery judged this process gone,
        or another turn repaired the history): the first answers stand, and the turn
        stops here, ``interrupted``, answering what it still had open."""
        log.warning("turn %s was taken over: %s", self.turn.id, exc.message)
        self._discard_shown("failed")
        await self.record.answer_all(TAKEN_OVER, "interrupted")
        return await self._finish("interrupted", error=f"taken_over: {exc.message}")

    async def _hand_over(self) -> None:
        """Stop at this step boundary (every call answered, nothing in flight): mark the
        turn handed over and end its task with ``HandedOver``; another server goes on
        with it (``ostinato.handover``). If the mark is refused the turn was taken over
        already: it stops as that says."""
        self.tools.stop()
        self.watch.finish("interrupted")
        if self.spend is not None:  # the turn's calls here are charged here
            await self.spend.close()
        if await claim_turn(self.store, self.turn.id, self.turn.holder, mark(self.turn.holder)):
            log.info("turn %s handed over at a step boundary", self.turn.id)
        else:  # recovery judged this server gone: the turn is another's already
            log.warning("turn %s was taken over before it could be handed over", self.turn.id)
        raise HandedOver

    async def _ended(self, reason: TurnStopReason, unanswered: dict[str, str]) -> TurnResult:
        if self.concluded is not None:  # its answer and its end were one write
            return self.concluded
        await self.record.answer(unanswered)
        return await self._finish(reason)

    async def _teardown_cancelled(self) -> None:
        if self.record.ended:  # the cancel came once the end had committed: it stands
            return
        await self.record.answer_all(INTERRUPTED, "interrupted")
        await self._keep_shown()
        await self._finish("cancelled")

    async def _keep_shown(self) -> None:
        """Keep the text a cancelled model call had shown, as an assistant row marked
        ``partial`` (no thinking, and no tool call: one cut short is never a call)."""
        shown, self.shown = self.shown, None
        if shown is None or not shown.deltas:
            return
        if (row := shown.partial_row()) is None:
            self.record.emit(
                TextDiscarded(run_id=self.turn.run_id, seq=self.seq, reason="cancelled")
            )
            return
        await self.record.commit([row])

    def _discard_shown(self, reason: str) -> None:
        """What a model call showed will not be stored: tell the surfaces to drop it."""
        shown, self.shown = self.shown, None
        if shown is not None and shown.deltas:
            self.record.emit(TextDiscarded(run_id=self.turn.run_id, seq=self.seq, reason=reason))

    # --- model calls -----------------------------------------------------------------

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
        purpose = "wrap_up" if tools_off else "step"
        try:
            reply = await self._stream(request, purpose)
        except ContextTooLong:
            if compacted or self.context is None:
                raise
            if not await self.context.compact(self, "provider"):
                raise
            request = self._request(tools_off)
            reply = await self._stream(request, purpose)
        if self.context is not None:
            self.context.observe(self, request, reply.usage)
        return reply

    async def _model_step(self, state: LoopState, tools_off: bool) -> tuple[LoopState, NextStep]:
        """A model call and the decision on its reply, committed. A wrap-up call that
        fails still leaves the person a sentence: a fixed one, stored instead."""
        if self.handing is not None and self.handing.is_set():  # a step boundary
            await self._hand_over()
        if self.steering is not None:  # messages sent with ``steer``: the call sees them
            await self.steering.take(self.record)
        try:
            reply = await self._call_model(tools_off)
        except Stopped as stop:  # a spend limit: the call was not made
            return state, await self._spend_stop(stop)
        except ModelError as exc:
            if not state.wrapping_up:
                raise
            return state, await self._fixed_wrap_up(state.stopping or "budget_exhausted", exc)
        except BaseException as exc:
            if self.spend is not None:  # e.g. a cancel after the reply: charged alone
                await self.spend.unpaid(exc)
            raise
        state, step = after_reply(state, reply)
        try:
            if isinstance(step, RunTools) and step.awaiting is not None:  # a card
                step = await self._unless_unfit(step)
            if isinstance(step, Finish) and not step.unanswered and not reply.tool_uses:
                self.concluded = await self._conclude(reply, step)
            else:
                await self._commit_reply(reply, step)
        except BaseException as exc:
            if self.spend is not None:  # the reply's row, with its charge, not committed
                await self.spend.unpaid(exc)
            raise
        return state, step

    async def _fixed_wrap_up(self, reason: TurnStopReason, exc: ModelError) -> Finish:
        log.warning("turn %s: the wrap-up call failed (%s)", self.turn.id, exc.code)
        self._discard_shown("failed")
        error = redact(f"{exc.code}: {exc.message}")
        metadata = {"metrics": self.metrics(), "stop_reason": reason, "wrap_up_error": error}
        text = WRAP_UP_FALLBACK[reason]
        await self.record.commit([Message("assistant", (TextBlock(text),), metadata=metadata)])
        return Finish(reason, {})

    async def _spend_stop(self, stop: Stopped) -> Finish:
        """The turn ends ``spend_limit`` with a sentence saying why and when it resets."""
        metadata = {"metrics": self.metrics(), "stop_reason": "spend_limit", "spend": stop.detail}
        row = Message("assistant", (TextBlock(stop.sentence),), metadata=metadata)
        await self.record.commit([row])
        return Finish("spend_limit", {})

    async def _stream(self, request: ModelRequest, purpose: str) -> ModelReply:
        spend, held = self.spend, None
        if spend is not None and not spend.gate.checks:  # only counted: no coroutine
            held = spend.counted(self.model.name)
        elif spend is not None:  # a checked call's estimate: the context keeper has its size
            tokens = self.context.raw(self, request) if self.context else None
            held = spend.drawn(self.model.name, request, tokens)  # from what the turn reserved
            held = held or await spend.clear(self.model.name, request, self.seq, tokens)
        builder = MessageBuilder(request)
        if self.shown is not None:  # an earlier attempt of this call (compacted, retried)
            self._discard_shown("retry")
        self.shown = Shown()
        call = observe.model_call(self.model.name, request, purpose)
        try:  # not a ``with``: the two calls it would add are the observation's per step
            await stream_reply(
                self.model,
                request,
                builder,
                self.shown,
                deadline=self.settings.model_timeout,
                emit=self.record.emit,
                run_id=self.turn.run_id,
                seq=self.seq,
                call=call,
            )
            reply = unique_tool_ids(builder.finish(), self.tool_ids)
        except BaseException as exc:
            call.failed(exc)
            if spend is not None:  # charged all the same: the call was made
                await asyncio.shield(spend.charge(held, spent(builder, None)))
            raise
        call.replied(reply)
        if spend is not None:  # charged in the reply's write (``_commit_reply``)
            await spend.owe(held, reply.usage)
        return reply

    def metrics(self) -> dict[str, Any]:
        """The turn's metrics block as of now (``observe.ledger``)."""
        metrics = self.watch.ledger.snapshot(self.watch.model)
        if self.route is not None:
            metrics["route"] = self.route
        return metrics

    async def _unless_unfit(self, step: RunTools) -> NextStep:
        """A ``ui`` call whose arguments do not fit its tool's schema pauses nothing: it
        runs like any other call, so validation answers the model with an error result
        (invariant 5) instead of a card a person cannot answer."""
        call = next(c for c in step.calls if c.id == step.awaiting)
        tool = self.catalog.by_name.get(call.name)
        try:
            if tool is not None:
                await validated(tool, call.input)
        except ToolError:
            return replace(step, awaiting=None)
        return step

    def _reply_row(self, reply: ModelReply, step: NextStep) -> Message:
        """The row a reply is stored as: a final answer carries the metrics; a card is
        part of its row; a step of lookups only (``read`` tools, no text) is hidden."""
        message = reply.message
        if isinstance(step, Finish) and not reply.tool_uses:
            return Message(
                role="assistant",
                blocks=message.blocks or (TextBlock(""),),  # an empty reply is still a reply
                metadata={"metrics": self.metrics(), "stop_reason": step.stop_reason},
            )
        if isinstance(step, RunTools) and step.awaiting is not None:
            # The card is part of the row, so it survives a reload and shows in /messages.
            self.awaiting = next(c for c in step.calls if c.id == step.awaiting)
            return Message("assistant", message.blocks, metadata={"awaiting": step.awaiting})
        if isinstance(step, RunTools) and self._lookups(step.calls) and not message.text.strip():
            return Message("assistant", message.blocks, hidden=True, metadata={"lookup": True})
        if not message.blocks:
            return Message("assistant", (TextBlock(""),), metadata=message.metadata)
        return message

    def _lookups(self, calls: Sequence[ToolUseBlock]) -> bool:
        """Every call is to a ``read`` tool of this turn's catalog (rows hidden from the
        chat view, kept for the model)."""
        by_name = self.catalog.by_name
        for call in calls:  # a loop, not ``all``: it runs twice a step
            tool = by_name.get(call.name)
            if tool is None or tool.category != "read":
                return False
        return bool(calls)

    async def _commit_results(self, runs: list[ToolRun], note: str | None) -> None:
        lookups = self._lookups([r.call for r in runs])  # results of lookups only: hidden too
        metadata = {"lookup": True} if lookups else None
        await self.record.commit_results(runs, note, hidden=lookups, metadata=metadata)

    async def _commit_reply(self, reply: ModelReply, step: NextStep) -> None:
        message = self._reply_row(reply, step)
        self.shown = None  # the reply is what was shown, and more: it is stored whole
        starts: list[StartToolCall] = []
        if isinstance(step, RunTools):
            now = utcnow()
            for call in step.calls:
                if call.id not in step.broken:
                    waiting = call.id == step.awaiting
                    starts.append(start_op(self.turn, call, now, waiting))
        owed = self.spend.owed() if self.spend is not None else ()
        await self.record.commit([message], [*starts, *owed])  # opens its calls (``TurnRecord``)
        if self.spend is not None:
            self.spend.paid()
        if isinstance(step, RunTools):
            for call in step.calls:
                if call.id not in step.broken and call.id != step.awaiting:
                    tool = self.catalog.by_name.get(call.name)
                    self.record.started(call, tool.category if tool else "action")

    async def _conclude(self, reply: ModelReply, step: Finish) -> TurnResult:
        """A final answer, no call left open: its row and the turn's end in one write."""
        self.tools.stop()
        self.watch.settle()  # first: the row's metrics are the turn's, as ``_finish``'s
        message = self._reply_row(reply, step)
        self.shown = None  # the reply is what was shown, and more: it is stored whole
        spend, reason, metrics = self.spend, step.stop_reason, self.metrics()
        owed, timeline = spend.owed() if spend is not None else (), self.watch.ledger.timeline()
        try:
            await self.record.conclude(message, reason, metrics, timeline, owed)
        finally:
            if self.record.ended:
                self.watch.finish(reason)
                if spend is not None:  # parked once its count is in: no turn sees it before
                    spend.paid()
                    await spend.close(park=True)
        return TurnResult(self.turn.id, self.turn.run_id, reason, metrics, self.written)

    async def _finish(self, reason: TurnStopReason, error: str | None = None) -> TurnResult:
        self.tools.stop()
        error = redact(error) if error else error  # stored, sent and returned: no secrets
        self.watch.settle()
        metrics = self.metrics()
        try:
            timeline = self.watch.ledger.timeline()
            tab = self.spend.closing() if self.spend is not None else ()  # charged with it
            await self.record.finish(reason, metrics, error, self.awaiting, timeline, tab)
        finally:
            self.watch.finish(reason)
        return TurnResult(self.turn.id, self.turn.run_id, reason, metrics, self.written, error)
