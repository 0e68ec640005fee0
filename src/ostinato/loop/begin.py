"""Beginning a turn: its opening rows, its skill, tools and model, the commit that
announces it, and the task that drives it.

The runtime reads the conversation and its history window, asks one of the ``open_*``
functions for the turn's ``Opening`` (what the input adds to the history: a user message,
a card's answer, a decided approval's call), then ``begin`` freezes the turn's catalog,
commits the opening with the turn's row (``turn.started`` first, then each row) and
starts a ``TurnDriver``. It works through the store interface and the ``Parts`` it is
given; the pure decisions (what a paused conversation waits on, seed calls) are in
``loop.setup``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ostinato import observe
from ostinato.admission import Admission
from ostinato.agents import AgentConfig
from ostinato.approvals import Approval, outside_content
from ostinato.attachments import CONTEXT_KEY as ATTACHMENTS
from ostinato.attachments import files_of
from ostinato.bus import LocalBus
from ostinato.consent import ConsentGate, TurnConsent
from ostinato.context.compaction import Compactor
from ostinato.context.keeper import ContextKeeper
from ostinato.context.window import build as build_window
from ostinato.errors import Conflict
from ostinato.frames import MessageCommitted, TurnStarted
from ostinato.loop.after import accounted
from ostinato.loop.driver import Seeded, TurnDriver, TurnResult
from ostinato.loop.record import start_op
from ostinato.loop.setup import (
    card_answer,
    open_tool_use,
    open_tool_uses,
    seed_calls,
    waiting_answers,
)
from ostinato.memory.facts import scope_for
from ostinato.messages import FileBlock, Message, ToolUseBlock
from ostinato.models.base import Model
from ostinato.pinning import Pinning
from ostinato.skills import Route, Router, Skill, last_skill, sticky_persona
from ostinato.store.answered import write_answers
from ostinato.store.base import (
    AppendMessage,
    Conversation,
    HistoryWindow,
    QueuedInput,
    SetConversationState,
    StartToolCall,
    StartTurn,
    Store,
    TakeQueued,
    Turn,
    WriteOp,
    utcnow,
)
from ostinato.tools import processes
from ostinato.tools.mounting import Mount
from ostinato.tools.processes import CONTEXT_KEY as PROCESSES
from ostinato.tools.registry import ToolCatalog, ToolRegistry
from ostinato.tools.workdir import workdir_for

RUNTIME = "runtime"  # ToolContext.extras keys: the runtime (for sub-agents) and the route
ROUTE = "route"
BACKGROUND = "background_run_id"  # a user row's metadata: it hands on background work

log = logging.getLogger("ostinato.loop")


class AfterTurn(Protocol):
    """Background work after a turn that ended with an answer (e.g. fact extraction).
    ``answer`` is None when the turn took in content from outside the conversation: the
    answer may repeat it, and only the user's own words are the user's."""

    async def __call__(
        self,
        *,
        conversation_id: str,
        owner: str | None,
        turn_id: str,
        user: Message,
        answer: Message | None,
    ) -> Any: ...


class Parts(Protocol):
    """What a turn is begun with (the runtime provides it; read at each turn, so a
    change to a part applies from the next turn)."""

    @property
    def store(self) -> Store: ...
    @property
    def bus(self) -> LocalBus: ...
    @property
    def router(self) -> Router: ...
    @property
    def mount(self) -> Mount: ...
    @property
    def consent(self) -> ConsentGate: ...
    @property
    def compactor(self) -> Compactor: ...
    @property
    def seed_recall(self) -> bool: ...
    @property
    def data_dir(self) -> Path | None: ...
    @property
    def disabled_tools(self) -> frozenset[str]: ...
    @property
    def protected_tools(self) -> frozenset[str]: ...
    @property
    def after_turn(self) -> AfterTurn | None: ...
    @property
    def admission(self) -> Admission: ...
    @property
    def pinning(self) -> Pinning | None: ...

    def model_for(self, conversation: Conversation, skill: Skill | None = None) -> Model: ...

    async def switched_off(self, scope: str) -> frozenset[str]: ...

    def keep(self, work: asyncio.Future[Any]) -> None:
        """Hold background work until it ends (the runtime finishes it at close)."""
        ...


@dataclass(frozen=True, slots=True)
class Opening:
    """What an input adds as its turn begins."""

    kind: str  # the turn's kind: "user", "resume", "approval" or "background"
    route: Route
    ops: list[WriteOp]  # the rows (and other writes) committed with the turn's start
    carried: list[tuple[ToolUseBlock, str]] = field(default_factory=list)
    seeds: list[ToolUseBlock] = field(default_factory=list)
    files: dict[str, FileBlock] = field(default_factory=dict)
    client_message_id: str | None = None
    instructions: str | None = None  # added to the skill's system prompt (it allows it)
    background_run_id: str | None = None  # the work a "background" turn delivers
    # a card's answer must be written: a card answered meanwhile refuses the turn
    # (``AlreadyAnswered``); other answers (what the user moved on from) may lose the race
    exact: bool = False


@dataclass(frozen=True, slots=True)
class Begun:
    """A turn that has begun: its row, its opening rows, and the task that runs it."""

    turn: Turn
    rows: tuple[Message, ...]
    task: asyncio.Task[TurnResult]
    position: Callable[[], int]  # the seq of the turn's last committed row


# --- openings --------------------------------------------------------------------------


async def open_with_message(
    parts: Parts,
    conversation: Conversation,
    history: list[Message],
    turn_id: str,
    message: Message,
    *,
    queued: QueuedInput | None = None,
    client_message_id: str | None = None,
    skill: str | None = None,
    instructions: str | None = None,
) -> Opening:
    """A user message: routed to a skill (the one the request named, if it did); what the
    conversation waited on is answered (the user moved on); the turn-zero seed calls are
    worked out. The request's ``instructions`` are kept only if the skill allows them.
    A row that hands on background work's result (``metadata.background_run_id``, by
    ``ostinato.background``) begins a ``background`` turn."""
    route = await pinned_route(
        parts, conversation.id, await _route(parts.router, conversation, history, message, skill)
    )
    if instructions is not None:
        allowed = route.skill.agent.request_instructions
        route = replace(route, detail={**route.detail, "instructions": allowed})
        instructions = instructions if allowed else None
    files = files_of(message)
    seeds = seed_calls(message, files, recall=parts.seed_recall)
    pending = await pending_approvals(parts.store, conversation.id, history)
    ops, _ = waiting_answers(conversation.id, history, pending, message.text)
    message = Message(
        "user", message.blocks, message.hidden, {**message.metadata, "route": route.record}
    )
    ops.append(AppendMessage(conversation.id, message, turn_id))
    if queued is not None:
        ops.append(TakeQueued(queued.id))
        observe.queued(-1)
    background = message.metadata.get(BACKGROUND)
    return Opening(
        "background" if background else "user",
        route,
        ops,
        seeds=seeds,
        files=files,
        client_message_id=client_message_id,
        instructions=instructions,
        background_run_id=str(background) if background else None,
    )


async def _route(
    router: Router,
    conversation: Conversation,
    history: list[Message],
    message: Message,
    skill: str | None,
) -> Route:
    named = router.get(skill)
    if named is not None:
        return Route(named, "requested")
    return await router.route(
        message.text, sticky_persona=conversation.persona or sticky_persona(history)
    )


async def pinned_route(parts: Parts, conversation_id: str, route: Route) -> Route:
    """The route with the version of its agent the conversation runs (``ostinato.pinning``):
    the skill rebuilt from that version when it is not the current one, and the version's
    number recorded with the route (``version``)."""
    pinning = parts.pinning
    if pinning is None or "version" in route.detail:
        return route
    skill, number = await pinning.resolve(conversation_id, route.skill)
    return replace(route, skill=skill, detail={**route.detail, "version": number})


def open_with_card_answer(
    parts: Parts,
    conversation_id: str,
    history: list[Message],
    turn_id: str,
    tool_use_id: str,
    result: Any,
) -> Opening:
    """The answer to the waiting question card; ``Conflict`` for a wrong or stale id."""
    ops = card_answer(conversation_id, history, tool_use_id, result, turn_id)
    return Opening("resume", resumed_route(parts.router, history), ops, exact=True)


def open_with_approval(parts: Parts, history: list[Message], approval: Approval) -> Opening:
    """An approval decided after its turn had stopped: the new turn runs its call first."""
    use = open_tool_use(history, approval.tool_use_id)
    if use is None:
        raise Conflict(f"the call {approval.tool_use_id!r} was already answered")
    route = resumed_route(parts.router, history)
    return Opening("approval", route, [], carried=[(use, approval.turn_id)])


def resumed_route(router: Router, history: list[Message]) -> Route:
    """A resumed turn keeps the skill of the turn it continues."""
    skill = router.get(last_skill(history))
    return Route(skill, "resumed") if skill else Route(router.default, "default")


async def pending_approvals(
    store: Store, conversation_id: str, history: list[Message]
) -> list[Approval]:
    """The approvals still pending in a conversation whose newest turn has open calls."""
    if not open_tool_uses(history):
        return []
    return await store.list_approvals(conversation_id, pending_only=True)


# --- beginning -------------------------------------------------------------------------


async def begin(
    parts: Parts,
    conversation: Conversation,
    window: HistoryWindow,
    turn: Turn,
    opening: Opening,
    model: Model | None = None,
) -> Begun:
    """Commit the opening with the turn's start, announce it, and start its driver."""
    turn = dataclasses.replace(turn, kind=opening.kind)  # (its holder kept)
    opening = replace(opening, route=await pinned_route(parts, conversation.id, opening.route))
    skill = opening.route.skill
    registry, catalog = await _tools(parts, conversation, skill)
    model = model or parts.model_for(conversation, skill)
    seeding = seed_start(turn, opening.seeds, catalog)
    stored = await _commit_start(parts, turn, opening, seeding)
    prior = build_window(window.rows, summary=window.summary, max_tokens=skill.agent.history_tokens)
    keeper = ContextKeeper(parts.compactor, reserve=skill.agent.max_tokens)
    keeper.known(len(prior.messages), prior.tokens)
    history = [*prior.messages, *stored]
    consent = TurnConsent(
        parts.consent, skill.approvals, outside=outside_content(history, registry.get)
    )
    driver = TurnDriver(
        store=parts.store,
        bus=parts.bus,
        model=model,
        catalog=catalog,
        settings=with_instructions(skill.agent, opening.instructions),
        turn=turn,
        history=history,
        turn_rows=len(stored),
        consent=consent,
        context=keeper,
        owner=conversation.owner,
        workdir=workdir_for(parts.data_dir, conversation.id) if parts.data_dir else None,
        carried=opening.carried,
        seeded=Seeded(stored[-1], seeding.starts) if seeding else None,
        tool_extras={
            ATTACHMENTS: opening.files,
            RUNTIME: parts,
            ROUTE: opening.route,
            PROCESSES: parts.data_dir / processes.FOLDER if parts.data_dir else None,
        },
        route=opening.route.record,
    )
    task = asyncio.create_task(driver.run(), name=f"turn-{turn.id}")
    # Let the task take its first step before anyone can cancel it: a task cancelled
    # before it starts never runs its body, so its teardown would be skipped.
    await asyncio.sleep(0)
    user = next((r for r in stored if r.role == "user"), None)
    # A hidden row is not the person's words (a scheduled prompt's, a trigger's): no
    # after-turn work reads it as theirs.
    if parts.after_turn is not None and user is not None and not user.hidden:
        task.add_done_callback(lambda done: _after(parts, done, conversation, user, consent))
    opened = stored[:-1] if seeding else stored  # the seed row is the driver's
    return Begun(turn, tuple(opened), task, lambda: driver.seq)


async def _commit_start(
    parts: Parts, turn: Turn, opening: Opening, seeding: SeedStart | None
) -> list[Message]:
    """The turn's start in one write: the opening's rows and ops, the turn's row, the
    conversation ``running``, and the seed calls; announced after it commits."""
    return await commit_rows(
        parts.store,
        parts.bus,
        turn.run_id,
        [
            *opening.ops,
            StartTurn(turn),
            SetConversationState(turn.conversation_id, "running"),
            *(seeding.ops if seeding else ()),
        ],
        started=turn,
        route=opening.route,
        client_message_id=opening.client_message_id,
        background_run_id=opening.background_run_id,
        exact=opening.exact,
    )


@dataclass(frozen=True, slots=True)
class SeedStart:
    """The turn-zero calls as written with the turn's start: their hidden row, then their
    started records."""

    row: AppendMessage
    starts: tuple[StartToolCall, ...]

    @property
    def ops(self) -> tuple[WriteOp, ...]:
        return (self.row, *self.starts)


def seed_start(turn: Turn, seeds: Sequence[ToolUseBlock], catalog: ToolCatalog) -> SeedStart | None:
    """The seed calls the turn's catalog offers, to be committed with the turn's start
    (one write fewer before the first model call than committing them on their own)."""
    offered = tuple(call for call in seeds if call.name in catalog.by_name)
    if not offered:
        return None
    now = utcnow()
    row = Message("assistant", offered, hidden=True, metadata={"seed": True})
    starts = tuple(start_op(turn, call, now) for call in offered)
    return SeedStart(AppendMessage(turn.conversation_id, row, turn.id), starts)


def with_instructions(agent: AgentConfig, instructions: str | None) -> AgentConfig:
    """The agent's settings with a request's addition after its system prompt."""
    if not instructions or not instructions.strip():
        return agent
    prompt = f"{agent.system_prompt.rstrip()}\n\n{instructions.strip()}"
    return replace(agent, system_prompt=prompt)


async def _tools(
    parts: Parts, conversation: Conversation, skill: Skill
) -> tuple[ToolRegistry, ToolCatalog]:
    """The tools mounted for the conversation's owner, and the catalog the turn offers."""
    mounted = await parts.mount.registry(conversation.owner, conversation.id)
    switched_off = await parts.switched_off(scope_for(conversation.owner, conversation.id))
    catalog = mounted.registry.catalog(
        skill.agent.tools,
        disabled=parts.disabled_tools | switched_off,
        protected=parts.protected_tools,
    )
    return mounted.registry, catalog


def _after(
    parts: Parts,
    done: asyncio.Task[TurnResult],
    conversation: Conversation,
    user: Message,
    consent: TurnConsent,
) -> None:
    """Start the after-turn work for a turn that ended with an answer; the parts keep
    the task (a bare task could be collected while it runs)."""
    if done.cancelled() or done.exception() is not None or parts.after_turn is None:
        return
    if parts.admission.busy():  # background work is shed first
        log.info("after-turn work skipped: every turn slot is taken")
        return
    result = done.result()
    if result.stop_reason != "end_turn" or not result.messages:
        return
    work = asyncio.ensure_future(
        accounted(
            parts.store,
            parts.after_turn(
                conversation_id=conversation.id,
                owner=conversation.owner,
                turn_id=result.turn_id,
                user=user,
                answer=None if consent.outside else result.messages[-1],
            ),
        )
    )
    parts.keep(work)


async def commit_rows(
    store: Store,
    bus: LocalBus,
    run_id: str,
    ops: Sequence[WriteOp],
    *,
    started: Turn | None = None,
    route: Route | None = None,
    client_message_id: str | None = None,
    background_run_id: str | None = None,
    exact: bool = False,
) -> list[Message]:
    """Commit ops, then announce: ``turn.started`` first, then each row in seq order.
    A result for a call answered meanwhile is left out (a lost race, ``store.answered``)
    unless ``exact``, when it refuses the write (``AlreadyAnswered``)."""
    if not ops:
        return []
    results = await store.write(*ops) if exact else (await write_answers(store, *ops)).results
    rows = [r for r in results if isinstance(r, Message)]
    cid = next(
        op.conversation_id for op in ops if isinstance(op, SetConversationState | AppendMessage)
    )
    # turn.started comes first and says where the turn begins: after the row before
    # its own rows (non-decreasing seq on the stream).
    before = (rows[0].seq or 1) - 1 if rows else bus.last_seq(cid)
    if started is not None:
        bus.publish(
            cid,
            TurnStarted(
                run_id=run_id,
                seq=before,
                turn_id=started.id,
                kind=started.kind,
                skill=route.skill.id if route else None,
                persona=route.skill.persona if route else None,
                tier=route.skill.tier if route else None,
                agent_version=route.detail.get("version") if route else None,
                background_run_id=background_run_id,
            ),
        )
    for row in rows:
        echo = client_message_id if row.role == "user" else None
        bus.publish(
            cid,
            MessageCommitted(run_id=run_id, seq=row.seq or 0, message=row, client_message_id=echo),
        )
    return rows
