"""The runtime: store, bus, model, tools and agent put together; what the server and the
CLI drive. It accepts inputs (messages, card answers, approval decisions), which its
workers (``turns``) turn into turns one at a time per conversation (``loop.begin``
begins each), cancels, and recovers after a crash."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from ostinato.admission import Admission, Held
from ostinato.agents import AgentConfig
from ostinato.approvals import Approval, ApprovalPolicy, Grant, Remember
from ostinato.bus import LocalBus
from ostinato.consent import ConsentGate
from ostinato.context.compaction import Compactor
from ostinato.elsewhere import cancel_elsewhere
from ostinato.errors import Conflict, InvalidRequest, NotFound
from ostinato.frames import Frame, TurnFinished
from ostinato.handover import HANDED
from ostinato.holds import Holds
from ostinato.ids import new_id
from ostinato.inputs import begin_input, continued
from ostinato.leases import Lease
from ostinato.loop.begin import commit_rows
from ostinato.loop.driver import TurnResult
from ostinato.loop.opening import AfterTurn
from ostinato.memory.facts import Memory
from ostinato.messages import JSON, Message
from ostinato.models.base import Model
from ostinato.pinning import Pinning
from ostinato.queueing import announce, enqueue
from ostinato.recovery import sweep
from ostinato.skills import Router, Skill
from ostinato.spend.gate import SpendGate
from ostinato.spend.seam import GATE
from ostinato.steered_elsewhere import follow, taken_late
from ostinato.store.base import Conversation, CreateConversation, QueuedInput, Store, Turn, utcnow
from ostinato.store.leases import ConversationHolds
from ostinato.submissions import (
    ApprovalOutcome,
    CancelOutcome,
    CardAnswer,
    Continued,
    NewMessage,
    Submission,
    TurnHandle,
    user_message,
)
from ostinato.switches import ToolSwitches, ToolSwitchState
from ostinato.switching import TreeMoves, answer_waiting
from ostinato.tools import processes
from ostinato.tools.builtins import default_registry
from ostinato.tools.forge.pool import Sandbox
from ostinato.tools.manage import PROTECTED
from ostinato.tools.mounting import Mount, Source
from ostinato.tools.processes import stop_left
from ostinato.tools.registry import ToolRegistry
from ostinato.turns import Policy, Workers
from ostinato.waiting import QueueEdits, fresh

PROTECTED_TOOLS = frozenset({"ask_user", "read_attachment"})  # never switched off by default
ModelChoice = Model | Callable[[Conversation], Model]
ModelResolver = Callable[[str], Model]
"""Turns a tier name or a ``provider:model`` id into a model."""


class Runtime(TreeMoves, QueueEdits):
    """(Edits, regenerations and switches: ``TreeMoves``, ``ostinato.switching``; the
    waiting messages: ``QueueEdits``, ``ostinato.waiting``.)"""

    pinning: Pinning | None = None  # the agents' versions (``ostinato.pinning``)
    _closed = False  # set by ``close``

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
        router: Router | None = None,
        models: ModelResolver | None = None,
        mount: Mount | None = None,
        disabled_tools: frozenset[str] = frozenset(),
        protected_tools: frozenset[str] = PROTECTED_TOOLS,
        after_turn: AfterTurn | None = None,
        memory: Memory | None = None,
        sandbox: Sandbox | None = None,
        spend: SpendGate | None = None,
    ) -> None:
        """``model`` is the default model (or a function of the conversation).
        ``router`` picks a skill per turn (default: one skill made of ``agent``), and
        ``models`` turns a skill's tier into a model (default: always ``model``).
        ``tools`` (or a ``mount`` of several sources) are the tools; ``disabled_tools`` are
        switched off except the ``protected_tools``. ``compactor`` summarises long
        histories (give it a cheap-tier model; by default the turn's own model does).
        ``after_turn`` runs in the background after each turn that ends ``end_turn``
        (e.g. ``FactExtractor``); it is finished or cancelled at ``close``. ``spend``
        checks and counts every model call (``ostinato.spend``; None: none is)."""
        self.store = store
        self.bus = bus or LocalBus()
        self.tools = tools if tools is not None else default_registry()
        self.agent = agent or AgentConfig()
        self.mount = mount or Mount([Source("builtins", list(self.tools), builtin=True)])
        self.router = router or Router([Skill(self.agent.name, self.agent)])
        self.models = models
        self.disabled_tools = disabled_tools
        self.protected_tools = protected_tools | PROTECTED  # manage_tools, always
        self.history_limit = max(s.agent.history_messages for s in self.router.skills)
        self.after_turn = after_turn
        self.admission = Admission()  # unbounded; serve sets the [server] bounds
        self.memory: Memory | None = memory
        self.sandbox = sandbox or Sandbox()  # forged tools'; its workers start when used
        self.personal_mcp: Any = None  # people's MCP servers (tools.personal_mcp.PersonalMcp)
        self.switches = ToolSwitches(
            store, self.mount, disabled=disabled_tools, protected=self.protected_tools, bus=self.bus
        )
        self._background: set[asyncio.Future[Any]] = set()
        self.consent = ConsentGate(store, self.bus, approvals)
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.compactor = compactor or Compactor()
        self.seed_recall = seed_recall
        self._model = model
        self._workers = Workers(self._begin, lambda: self.admission)
        self.handing = self._workers.handing  # set: turns hand over (``ostinato.handover``)
        self.bus.on("cancel", self._cancel_here)
        self.lease: Lease | None = None  # this process's lease, if it takes one (``leases``)
        self.spend = spend

    @property
    def spend(self) -> SpendGate | None:
        """What checks every model call against the budgets and counts it."""
        return self._spend

    @spend.setter
    def spend(self, gate: SpendGate | None) -> None:
        self._spend = gate
        if gate is not None:
            gate.holder = lambda: self.holder  # a reservation names its server's lease

    def model_for(self, conversation: Conversation, skill: Skill | None = None) -> Model:
        """The turn's model: the conversation's own choice (``metadata.model``), else the
        skill's tier, else the default."""
        if self.models is not None:
            choice = conversation.metadata.get("model") or (skill.tier if skill else None)
            if isinstance(choice, str) and choice:
                return self._build(choice, conversation)
        if callable(self._model) and not hasattr(self._model, "stream"):
            return self._model(conversation)
        return self._model  # type: ignore[return-value]

    def _build(self, choice: str, conversation: Conversation) -> Model:
        """The model ``choice`` names; ``InvalidRequest`` naming it and the fix when it
        cannot be built (an unknown tier, a provider without a key)."""
        assert self.models is not None
        try:
            return self.models(choice)
        except Exception as exc:
            reason = getattr(exc, "message", None) or str(exc)
            fix = (
                f"set another model for conversation {conversation.id} (its 'model' setting)"
                if conversation.metadata.get("model") == choice
                else "fix the agent's tier in the configuration"
            )
            raise InvalidRequest(f"the model {choice!r} cannot be used: {reason}; {fix}") from None

    # --- conversations ---------------------------------------------------------------

    async def create_conversation(
        self, *, owner: str | None = None, title: str | None = None, metadata: JSON | None = None
    ) -> Conversation:
        now = utcnow()
        conversation = Conversation(new_id(), "idle", now, now, owner, None, title, metadata or {})
        pins = self.pinning.pins() if self.pinning is not None else ()
        await self.store.write(CreateConversation(conversation, pins))  # pinned as they are now
        return conversation

    async def conversation(self, conversation_id: str) -> Conversation:
        found = await self.store.get_conversation(conversation_id)
        if found is None:
            raise NotFound(f"no conversation with id {conversation_id!r}")
        return found

    def running(self, conversation_id: str) -> TurnHandle | None:
        """The turn running in this conversation in this process, if one is."""
        current = getattr(self._workers.get(conversation_id), "current", None)
        return current if current is not None and not current.task.done() else None

    def busy(self, conversation_id: str) -> bool:
        """Whether a turn runs (or waits to) in this conversation, in this process."""
        return self._workers.busy(conversation_id)

    @property
    def holder(self) -> str | None:
        """The id of this process's lease: the ``holder`` of every turn it begins."""
        return self.lease.id if self.lease is not None else None

    @property
    def draining(self) -> bool:
        """Shutting down: no new turn begins (``ShuttingDown``)."""
        return self._workers.draining

    # --- inputs ----------------------------------------------------------------------

    async def submit(
        self,
        conversation_id: str,
        message: Message | str,
        *,
        client_message_id: str | None = None,
        policy: Policy = "queue",
        model: Model | None = None,
        skill: str | None = None,
        instructions: str | None = None,
        known: Conversation | None = None,
    ) -> Submission:
        """Accept a user message. Returns once it is stored or its turn has begun;
        ``await submission.handle()`` gives the turn when it starts. ``skill`` names the
        agent that answers (``NotFound`` for an unknown one) instead of the router's pick;
        ``instructions`` are added to its system prompt if the agent allows it (not kept
        for a message that waits across a restart). A message that would start its
        conversation's worker first takes an ``admission`` slot (``Overloaded`` when none
        comes free in time), which the worker holds until it winds down."""
        if skill is not None and self.router.get(skill) is None:
            raise NotFound(f"no agent named {skill!r}")
        message = user_message(message, client_message_id)
        new = NewMessage(message, client_message_id, None, skill, instructions)
        if known is None or known.id != conversation_id:  # ``known``: the caller's own read
            await self.conversation(conversation_id)  # (the turn reads it afresh to begin)
        slot = await self._workers.slot_for(conversation_id)
        try:
            return await self._submit(conversation_id, new, policy, model, slot)
        finally:
            slot.release()  # unless a worker took it

    async def _submit(
        self, conversation_id: str, new: NewMessage, policy: Policy, model: Model | None, slot: Held
    ) -> Submission:
        self._workers.refuse_new()
        worker = self._workers.get(conversation_id)
        holds = self._workers.holds  # another server may run it (``ostinato.holds``)
        free = worker is None or worker.idle
        elsewhere = free and holds is not None and await holds.held_elsewhere(conversation_id)
        if free and not elsewhere:
            submission = Submission(new, model)
            self._workers.add(conversation_id, submission, slot.hand())
            await asyncio.wait([submission.started])
            return submission
        if policy == "reject":
            raise Conflict("a turn is running in this conversation and the policy is 'reject'")
        worker = self._workers.open(conversation_id)
        steer, holder = policy == "steer", self.holder
        watch = self.bus.subscribe(conversation_id) if steer and holds is not None else None
        try:
            submission = await enqueue(
                self.store, self.consent, worker, new, model, holder=holder, steer=steer
            )
        except BaseException:
            if watch is not None:
                watch.close()
            raise
        assert submission.queued is not None
        if watch is not None:  # a turn on another server may take it
            follow(self.store, self._workers, watch, submission)
        announce(self.bus, worker, submission.queued)
        if policy == "supersede" and elsewhere:
            await cancel_elsewhere(self.store, self.bus, conversation_id)
        elif policy == "supersede":
            await worker.cancel_current()
        return submission

    def steered(self, conversation_id: str, items: Sequence[QueuedInput]) -> None:
        """A turn took these steered messages (``loop.steering``): their senders follow it."""
        self._workers.steered(conversation_id, items)

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
        self._workers.refuse_new()
        if self._workers.busy(conversation_id):
            raise Conflict("a turn is running in this conversation; no card is waiting")
        slot = await self._workers.slot_for(conversation_id)
        submission = Submission(CardAnswer(tool_use_id, result), model)
        self._workers.add(conversation_id, submission, slot.hand())
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
        if not waiting:  # acting on it needs a new turn: none begins while shutting down
            self._workers.refuse_new()
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
            if conversation.state == "paused":  # answered once the continuation began
                work = ApprovalOutcome(decided)
                await continued(self._workers, conversation_id, work, self.admission.wait)
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
        elif conversation.state == "running":  # on another server? (``ostinato.elsewhere``)
            remote = await cancel_elsewhere(self.store, self.bus, conversation_id)
            if remote is not None:
                return CancelOutcome(remote, ())
        if conversation.state != "paused":
            raise Conflict("nothing to cancel: no turn is running and nothing waits")
        ops, answered = await answer_waiting(self, conversation_id, self.history_limit)
        await commit_rows(self.store, self.bus, "", ops)
        return CancelOutcome(None, tuple(answered))

    async def _cancel_here(self, conversation_id: str, _data: object) -> None:
        """Another server was asked to cancel: cancel the turn if it runs here."""
        worker = self._workers.get(conversation_id)
        if worker is not None:
            await worker.cancel_current()

    # --- tool switches (``ostinato.switches``) ---------------------------------------

    async def switched_off(self, scope: str) -> frozenset[str]:
        return await self.switches.switched_off(scope)

    async def tool_switches(self, scope: str) -> list[ToolSwitchState]:
        return await self.switches.states(scope)

    async def switch_tool(self, scope: str, tool: str, *, enabled: bool) -> ToolSwitchState:
        return await self.switches.switch(scope, tool, enabled=enabled)

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
        """Begin the turn an input causes (``loop.opening``, ``loop.begin``), observed from
        here: its routing is part of it (``ostinato.observe``)."""
        read = self.store.conversation_and_window  # one round trip on PostgreSQL
        conversation, window = await read(conversation_id, limit=self.history_limit)
        if conversation is None:
            raise NotFound(f"no conversation with id {conversation_id!r}")
        try:
            await fresh(self.store, submission)  # its latest text; gone: ``Conflict``
        except Conflict:  # a turn elsewhere may have taken a steered message
            late = submission.queued and await taken_late(self.store, self.bus, submission.queued)
            if not late:
                raise
            return late
        turn = Turn(new_id(), conversation_id, new_id(), "running", utcnow(), holder=self.holder)
        turn = submission.input.turn if isinstance(submission.input, Continued) else turn
        paying = GATE.set(self.spend)  # the turn's calls, and work after it, are checked
        try:
            return await begin_input(
                self, conversation, window, turn, submission, self.history_limit
            )
        finally:
            GATE.reset(paying)

    def keep(self, work: asyncio.Future[Any]) -> None:
        """Hold after-turn work until it ends; ``close`` finishes or cancels it."""
        self._background.add(work)
        work.add_done_callback(self._background.discard)

    async def settle(self, within: float | None = None) -> None:
        """Wait for the after-turn work started so far (tests, shutdown)."""
        if self._background:
            await asyncio.wait(set(self._background), timeout=within)

    # --- lifecycle -------------------------------------------------------------------

    async def recover(self) -> list[str]:
        """Take this process's lease (``self.lease``, if set), then recover what gone
        holders held (``recovery.sweep``); the ids of the turns it closed. Run once at
        start, before serving; with a lease it runs again after every renewal."""
        if self.data_dir is not None:  # commands a crashed server left running: stopped
            stop_left(self.data_dir / processes.FOLDER)
        if self.lease is not None:
            await self.lease.acquire()
            if isinstance(self.store, ConversationHolds):  # shared, with a relay or not
                self._workers.holds = Holds(self.store, self.lease.id, self.bus)
                self.bus.on(HANDED, lambda _c, _d: self._sweep())
                self.consent.shared = True
        closed = await self._sweep(everything=True)
        if self.lease is not None:
            self.lease.keep(self._sweep)
        return closed

    async def _sweep(self, everything: bool = False) -> list[str]:
        limit, holder = self.history_limit, self.holder
        return await sweep(self.store, self.tools, self._workers, limit, holder, everything)

    def active(self) -> int:
        return len(self._workers)

    async def drain(self, grace: float, *, hurry: asyncio.Event | None = None) -> None:
        """Shut down (``Workers.drain``): no new turn begins; running ones end within
        ``grace`` (less once ``hurry`` is set) or hand over to another live server."""
        if await self._workers.drain(grace, hurry):  # the others sweep now
            self.bus.command(HANDED, "", {})

    async def close(self) -> None:
        """Cancel running turns (each records ``cancelled``; ``drain`` first to give them
        a grace), charge the tabs parked between turns, release the lease, give
        after-turn work a few seconds to finish and cancel what remains, and close the
        store. A second call does nothing."""
        if self._closed:
            return
        self._closed = True
        await self._workers.drain(0.0)
        if self._spend is not None:  # the tabs kept between turns charged
            await self._spend.parking.close_all()
        if self.lease is not None:
            await self.lease.release()
        await self.settle(within=5.0)
        for work in list(self._background):
            work.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        await self.bus.aclose()
        await self.sandbox.aclose()
        await self.store.close()
