"""The runtime: store, bus, model, tools and agent put together; what the server and the
CLI drive. It accepts inputs (messages, card answers, approval decisions), begins the
turns they cause one at a time per conversation, cancels, and recovers after a crash."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ostinato.agents import AgentConfig
from ostinato.approvals import Approval, ApprovalPolicy, Ending, Grant, Remember, refusal
from ostinato.attachments import CONTEXT_KEY as ATTACHMENTS
from ostinato.attachments import files_of
from ostinato.bus import LocalBus
from ostinato.consent import ConsentGate
from ostinato.context.compaction import Compactor
from ostinato.context.keeper import ContextKeeper
from ostinato.context.window import build as build_window
from ostinato.errors import Conflict, InvalidRequest, NotFound
from ostinato.frames import Frame, InputQueued, MessageCommitted, TurnFinished, TurnStarted
from ostinato.ids import new_id
from ostinato.loop.driver import TurnDriver, TurnResult
from ostinato.messages import JSON, FileBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock
from ostinato.models.base import Model
from ostinato.recovery import recover
from ostinato.store.base import (
    AppendMessage,
    Conversation,
    CreateConversation,
    DecideApproval,
    Enqueue,
    FinishToolCall,
    QueuedInput,
    SetConversationState,
    StartTurn,
    Store,
    TakeQueued,
    Turn,
    WriteOp,
    utcnow,
)
from ostinato.tools.base import ToolRegistry
from ostinato.tools.builtins import default_registry
from ostinato.tools.workdir import workdir_for
from ostinato.turns import (
    ApprovalOutcome,
    CardAnswer,
    NewMessage,
    Policy,
    Submission,
    TurnHandle,
    Workers,
)

ModelChoice = Model | Callable[[Conversation], Model]


@dataclass(frozen=True, slots=True)
class CancelOutcome:
    cancelled_turn: str | None  # the running turn that was cancelled
    dismissed: tuple[str, ...]  # tool_use ids of cards / approvals resolved by the cancel


class Runtime:
    def __init__(
        self,
        store: Store,
        *,
        model: ModelChoice,
        tools: ToolRegistry | None = None,
        agent: AgentConfig | None = None,
        bus: LocalBus | None = None,
        approvals: ApprovalPolicy | None = None,
        data_dir: Path | str | None = None,
        compactor: Compactor | None = None,
        seed_recall: bool = True,
    ) -> None:
        """``compactor`` summarises long histories (give it a cheap-tier model); by
        default the turn's own model does."""
        self.store = store
        self.bus = bus or LocalBus()
        self.tools = tools if tools is not None else default_registry()
        self.agent = agent or AgentConfig()
        self.consent = ConsentGate(store, self.bus, approvals)
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.compactor = compactor or Compactor()
        self.seed_recall = seed_recall
        self._model = model
        self._workers = Workers(self._begin)

    def model_for(self, conversation: Conversation) -> Model:
        if callable(self._model) and not hasattr(self._model, "stream"):
            return self._model(conversation)
        return self._model  # type: ignore[return-value]

    # --- conversations ---------------------------------------------------------------

    async def create_conversation(
        self, *, owner: str | None = None, title: str | None = None, metadata: JSON | None = None
    ) -> Conversation:
        now = utcnow()
        conversation = Conversation(
            id=new_id(),
            state="idle",
            created_at=now,
            updated_at=now,
            owner=owner,
            title=title,
            metadata=metadata or {},
        )
        await self.store.write(CreateConversation(conversation))
        return conversation

    async def conversation(self, conversation_id: str) -> Conversation:
        found = await self.store.get_conversation(conversation_id)
        if found is None:
            raise NotFound(f"no conversation with id {conversation_id!r}")
        return found

    def busy(self, conversation_id: str) -> bool:
        """Whether a turn runs (or waits to) in this conversation, in this process."""
        return self._workers.busy(conversation_id)

    # --- inputs ----------------------------------------------------------------------

    async def submit(
        self,
        conversation_id: str,
        message: Message | str,
        *,
        client_message_id: str | None = None,
        policy: Policy = "queue",
        model: Model | None = None,
    ) -> Submission:
        """Accept a user message. Returns once it is stored or its turn has begun;
        ``await submission.handle()`` gives the turn when it starts."""
        if isinstance(message, str):
            message = Message(role="user", blocks=(TextBlock(message),))
        if message.role != "user" or not message.blocks:
            raise InvalidRequest("a turn starts with a non-empty user message")
        if client_message_id:
            message = Message(
                "user",
                message.blocks,
                message.hidden,
                {**message.metadata, "client_message_id": client_message_id},
            )
        await self.conversation(conversation_id)
        worker = self._workers.get(conversation_id)
        if worker is None or worker.idle:
            submission = Submission(NewMessage(message, client_message_id), model)
            self._workers.add(conversation_id, submission)
            await asyncio.wait([submission.started])
            return submission
        if policy == "reject":
            raise Conflict("a turn is running in this conversation and the policy is 'reject'")
        await self.consent.dismiss(conversation_id)  # the user typed instead of answering
        (queued,) = await self.store.write(
            Enqueue(QueuedInput(new_id(), conversation_id, message, utcnow(), client_message_id))
        )
        submission = Submission(NewMessage(message, client_message_id, queued), model)
        self._workers.add(conversation_id, submission)
        current = worker.current
        self.bus.publish(
            conversation_id,
            InputQueued(
                run_id=current.run_id if current else "",
                seq=current.position() if current else self.bus.last_seq(conversation_id),
                queued_id=queued.id,
                position=queued.position,
                client_message_id=client_message_id,
            ),
        )
        if policy == "supersede":
            await worker.cancel_current()
        return submission

    async def start_turn(
        self, conversation_id: str, message: Message | str, **kw: Any
    ) -> TurnHandle:
        """Submit a message and wait until its turn has begun (queued ones wait longer)."""
        return await (await self.submit(conversation_id, message, **kw)).handle()

    async def run_turn(self, conversation_id: str, message: Message | str, **kw: Any) -> TurnResult:
        """Run a turn to its end and return its result."""
        return await (await self.start_turn(conversation_id, message, **kw)).result()

    async def stream_turn(
        self, conversation_id: str, message: Message | str, **kw: Any
    ) -> AsyncIterator[Frame]:
        """Run a turn and yield its frames, from ``turn.started`` to ``turn.finished``."""
        subscription = self.bus.subscribe(conversation_id)
        try:
            handle = await self.start_turn(conversation_id, message, **kw)
            async for frame in subscription:
                if frame.run_id != handle.run_id:
                    continue
                yield frame
                if isinstance(frame, TurnFinished):
                    return
        finally:
            subscription.close()

    async def answer_card(
        self, conversation_id: str, tool_use_id: str, result: Any, *, model: Model | None = None
    ) -> TurnHandle:
        """Answer the question card ``tool_use_id``; the paused turn goes on in a new one.
        ``Conflict`` when no card with that id is waiting (wrong, stale, answered)."""
        await self.conversation(conversation_id)
        if self._workers.busy(conversation_id):
            raise Conflict("a turn is running in this conversation; no card is waiting")
        submission = Submission(CardAnswer(tool_use_id, result), model)
        self._workers.add(conversation_id, submission)
        return await submission.handle()

    async def decide(
        self,
        conversation_id: str,
        approval_id: str,
        *,
        approve: bool,
        remember: Remember = "none",
        who: str | None = "user",
        expires_in: float | None = None,
    ) -> Approval:
        """A person's decision on an approval. A turn waiting on it goes on; one that
        stopped meanwhile (a restart) is continued by a new turn. ``Conflict`` if the
        approval was already decided: the tool runs once, whatever is posted."""
        waiting = self.consent.waiting(approval_id)
        decided = await self.consent.decide(
            conversation_id,
            approval_id,
            approve=approve,
            remember=remember,
            who=who,
            expires_in=expires_in,
        )
        if not waiting and not self._workers.busy(conversation_id):
            conversation = await self.conversation(conversation_id)
            if conversation.state == "paused":
                self._workers.add(conversation_id, Submission(ApprovalOutcome(decided)))
        return decided

    async def cancel(self, conversation_id: str) -> CancelOutcome:
        """Cancel the running turn (it ends ``cancelled``: open calls get an interrupted
        result, a waiting approval is declined); or, when the conversation is paused,
        resolve what it waits on (cards dismissed, approvals declined)."""
        conversation = await self.conversation(conversation_id)
        worker = self._workers.get(conversation_id)
        if worker is not None:
            turn = await worker.cancel_current()
            if turn is not None:
                return CancelOutcome(turn.id, ())
        if conversation.state != "paused":
            raise Conflict("nothing to cancel: no turn is running and nothing waits")
        history = await self.store.list_messages(conversation_id)
        ops, answered = await self._resolve_waiting(conversation_id, history, None)
        ops.append(SetConversationState(conversation_id, "idle"))
        await self._commit_rows("", ops)
        return CancelOutcome(None, tuple(answered))

    # --- grants ----------------------------------------------------------------------

    async def list_grants(self, conversation_id: str) -> list[Grant]:
        conversation = await self.conversation(conversation_id)
        return await self.store.list_grants(
            owner=conversation.owner, conversation_id=conversation_id
        )

    async def revoke_grant(self, conversation_id: str, grant_id: str) -> Grant:
        grant = await self.store.get_grant(grant_id)
        mine = {g.id for g in await self.list_grants(conversation_id)}
        if grant is None or grant.id not in mine:
            raise NotFound(f"no grant {grant_id!r} for conversation {conversation_id!r}")
        return await self.consent.revoke(grant_id)

    # --- beginning a turn (run by the conversation's worker, one at a time) ----------

    async def _begin(self, conversation_id: str, submission: Submission) -> TurnHandle:
        conversation = await self.conversation(conversation_id)
        window = await self.store.window(conversation_id, limit=self.agent.history_messages)
        history = window.rows
        turn = Turn(new_id(), conversation_id, new_id(), "running", utcnow())
        ops: list[WriteOp]
        carried: list[tuple[ToolUseBlock, str]] = []
        seeds: list[ToolUseBlock] = []
        files: dict[str, FileBlock] = {}
        match submission.input:
            case NewMessage(message=message, queued=queued):
                files = files_of(message)
                seeds = self._seeds(message, files)
                ops, _ = await self._resolve_waiting(conversation_id, history, message.text)
                ops.append(AppendMessage(conversation_id, message, turn.id))
                if queued is not None:
                    ops.append(TakeQueued(queued.id))
            case CardAnswer(tool_use_id=tool_use_id, result=result):
                ops = self._card_answer(conversation_id, history, tool_use_id, result, turn)
                turn = Turn(
                    turn.id, conversation_id, turn.run_id, "running", turn.started_at, "resume"
                )
            case ApprovalOutcome(approval=approval):
                use = _open_tool_use(history, approval.tool_use_id)
                if use is None:
                    raise Conflict(f"the call {approval.tool_use_id!r} was already answered")
                carried.append((use, approval.turn_id))
                ops = []
                turn = Turn(
                    turn.id, conversation_id, turn.run_id, "running", turn.started_at, "approval"
                )
        stored = await self._commit_rows(
            turn.run_id,
            [*ops, StartTurn(turn), SetConversationState(conversation_id, "running")],
            started=turn,
            client_message_id=getattr(submission.input, "client_message_id", None),
        )
        prior = build_window(history, summary=window.summary, max_tokens=self.agent.history_tokens)
        driver = TurnDriver(
            store=self.store,
            bus=self.bus,
            model=submission.model or self.model_for(conversation),
            catalog=self.tools.catalog(self.agent.tools),
            settings=self.agent,
            turn=turn,
            history=[*prior.messages, *stored],
            turn_rows=len(stored),
            consent=self.consent,
            context=ContextKeeper(self.compactor, reserve=self.agent.max_tokens),
            owner=conversation.owner,
            workdir=workdir_for(self.data_dir, conversation_id) if self.data_dir else None,
            carried=carried,
            seeds=seeds,
            tool_extras={ATTACHMENTS: files},
        )
        task = asyncio.create_task(driver.run(), name=f"turn-{turn.id}")
        return TurnHandle(turn, tuple(stored), task, lambda: driver.seq)

    def _seeds(self, message: Message, files: dict[str, FileBlock]) -> list[ToolUseBlock]:
        """The turn-zero calls for a user message: a memory recall keyed on it, and one
        read per attached file (the driver skips tools the catalog does not offer)."""
        seeds = [
            ToolUseBlock(f"seed_{new_id()}", "read_attachment", {"name": name}) for name in files
        ]
        text = message.text.strip()
        if self.seed_recall and text:
            seeds.insert(0, ToolUseBlock(f"seed_{new_id()}", "recall", {"query": text[:500]}))
        return seeds

    async def _commit_rows(
        self,
        run_id: str,
        ops: list[WriteOp],
        *,
        started: Turn | None = None,
        client_message_id: str | None = None,
    ) -> list[Message]:
        """Commit ops, then announce: ``turn.started`` first, then each row in seq order."""
        if not ops:
            return []
        results = await self.store.write(*ops)
        rows = [r for r in results if isinstance(r, Message)]
        cid = next(
            op.conversation_id for op in ops if isinstance(op, SetConversationState | AppendMessage)
        )
        # turn.started comes first and says where the turn begins: after the row before
        # its own rows (non-decreasing seq on the stream).
        before = (rows[0].seq or 1) - 1 if rows else self.bus.last_seq(cid)
        if started is not None:
            self.bus.publish(
                cid,
                TurnStarted(run_id=run_id, seq=before, turn_id=started.id, kind=started.kind),
            )
        for row in rows:
            echo = client_message_id if row.role == "user" else None
            self.bus.publish(
                cid,
                MessageCommitted(
                    run_id=run_id, seq=row.seq or 0, message=row, client_message_id=echo
                ),
            )
        return rows

    def _card_answer(
        self,
        conversation_id: str,
        history: list[Message],
        tool_use_id: str,
        result: Any,
        turn: Turn,
    ) -> list[WriteOp]:
        card = _waiting_card(history)
        if card is None:
            raise Conflict("no question card is waiting in this conversation")
        use, card_turn = card
        if use.id != tool_use_id:
            raise Conflict(
                f"the card waiting is {use.id!r}, not {tool_use_id!r} (a stale or wrong id)"
            )
        content = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
        answer = Message("tool", (ToolResultBlock(use.id, content),))
        return [
            AppendMessage(conversation_id, answer, turn.id),
            FinishToolCall(card_turn, use.id, "ok", content, False, utcnow(), 0.0),
        ]

    async def _resolve_waiting(
        self, conversation_id: str, history: list[Message], user_text: str | None
    ) -> tuple[list[WriteOp], list[str]]:
        """Answer what a paused conversation waits on, because the user moved on
        (``user_text``) or cancelled (None): a card is dismissed; a pending approval ends
        DISMISSED (typed) or DECLINED (cancel). One tool message answers them all."""
        open_uses = _open_tool_uses(history)
        if not open_uses:
            return [], []
        card = _waiting_card(history)
        pending = {
            a.tool_use_id: a
            for a in await self.store.list_approvals(conversation_id, pending_only=True)
        }
        now = utcnow()
        blocks: list[ToolResultBlock] = []
        ops: list[WriteOp] = []
        for use, turn_id in open_uses:
            if card is not None and use.id == card[0].id:
                dismissal: JSON = {"dismissed": True}
                if user_text is not None:
                    dismissal["user_message"] = user_text
                text = json.dumps(dismissal, ensure_ascii=False)
                blocks.append(ToolResultBlock(use.id, text))
                ops.append(FinishToolCall(turn_id, use.id, "dismissed", text, False, now, 0.0))
            elif use.id in pending:
                ending = Ending.DISMISSED if user_text is not None else Ending.DECLINED
                text = refusal(ending, use.name)
                blocks.append(ToolResultBlock(use.id, text, is_error=True))
                ops.append(DecideApproval(pending[use.id].id, ending, now, "user"))
                ops.append(FinishToolCall(turn_id, use.id, "refused", text, True, now, 0.0))
            else:
                text = "interrupted: no result was recorded for this call"
                blocks.append(ToolResultBlock(use.id, text, is_error=True))
        ops.insert(0, AppendMessage(conversation_id, Message("tool", tuple(blocks))))
        return ops, [use.id for use, _ in open_uses]

    # --- lifecycle -------------------------------------------------------------------

    async def recover(self) -> list[str]:
        """Close turns a crash left running (invariant 8) and pick up queued messages;
        returns the ids of the turns it closed. Run once at start, before serving."""
        closed = await recover(self.store, self.tools)
        for item in await self.store.list_queued():
            self._workers.add(
                item.conversation_id,
                Submission(NewMessage(item.message, item.client_message_id, item)),
            )
        return closed

    def active(self) -> int:
        return len(self._workers)

    async def close(self) -> None:
        """Cancel running turns (each records ``cancelled``) and close the store."""
        await self._workers.close()
        await self.store.close()


def _open_tool_uses(history: list[Message]) -> list[tuple[ToolUseBlock, str]]:
    """tool_use blocks with no result yet, each with the id of the turn that made it."""
    answered = {r.tool_use_id for m in history for r in m.tool_results}
    return [
        (use, message.turn_id or "")
        for message in history
        if message.role == "assistant"
        for use in message.tool_uses
        if use.id not in answered
    ]


def _open_tool_use(history: list[Message], tool_use_id: str) -> ToolUseBlock | None:
    return next((u for u, _ in _open_tool_uses(history) if u.id == tool_use_id), None)


def _waiting_card(history: list[Message]) -> tuple[ToolUseBlock, str] | None:
    """The question card the conversation waits on: the newest assistant row marked
    ``awaiting`` whose call has no result yet."""
    answered = {r.tool_use_id for m in history for r in m.tool_results}
    for message in reversed(history):
        awaiting = message.metadata.get("awaiting") if message.role == "assistant" else None
        if awaiting:
            use = next((u for u in message.tool_uses if u.id == awaiting), None)
            if use is not None and use.id not in answered:
                return use, message.turn_id or ""
            return None
    return None
