"""The opening of a turn: what the input that causes it adds to the history before the
model is called (a user message, a card's answer, a decided approval's call, the move of
an edit or a regenerate), worked out from the history window and committed by
``loop.begin`` with the turn's start.

``Parts`` is what a turn is begun with (the runtime provides it); the pure decisions
(what a paused conversation waits on, seed calls) are in ``loop.setup``, and what an
edit or a regenerate asks of the tree in ``ostinato.branching``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ostinato import observe
from ostinato.admission import Admission
from ostinato.approvals import Approval
from ostinato.attachments import files_of
from ostinato.branching import Fork, as_stored, fork_for
from ostinato.bus import LocalBus
from ostinato.consent import ConsentGate
from ostinato.context.compaction import Compactor
from ostinato.errors import Conflict
from ostinato.loop.setup import (
    card_answer,
    open_tool_use,
    open_tool_uses,
    seed_calls,
    waiting_answers,
)
from ostinato.messages import FileBlock, Message, ToolUseBlock
from ostinato.models.base import Model
from ostinato.pinning import Pinning
from ostinato.skills import Route, Router, Skill, last_skill, sticky_persona
from ostinato.store.base import (
    STEER,
    AppendMessage,
    Conversation,
    HistoryWindow,
    QueuedInput,
    Store,
    TakeQueued,
    WriteOp,
)
from ostinato.store.branches import MoveBranch
from ostinato.submissions import ApprovalOutcome, CardAnswer, Continued, Input, NewMessage
from ostinato.tools.mounting import Mount

BACKGROUND = "background_run_id"  # a user row's metadata: it hands on background work


class AfterTurn(Protocol):
    """Background work after a turn that ended with an answer (e.g. fact extraction).
    ``answer`` is None when the turn took in content from outside the conversation: the
    answer may repeat it, and only the user's own words are the user's. ``conversation``
    is the conversation's row as the turn read it when it began (not read again: a
    work that must see a later change reads it itself)."""

    async def __call__(
        self,
        *,
        conversation_id: str,
        owner: str | None,
        turn_id: str,
        user: Message,
        answer: Message | None,
        conversation: Conversation | None = None,
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
    @property
    def handing(self) -> asyncio.Event | None:
        """Set when running turns are to hand over at their next step (a shutdown)."""
        ...

    def model_for(self, conversation: Conversation, skill: Skill | None = None) -> Model: ...

    async def switched_off(self, scope: str) -> frozenset[str]: ...

    def keep(self, work: asyncio.Future[Any]) -> None:
        """Hold background work until it ends (the runtime finishes it at close)."""
        ...

    def steered(self, conversation_id: str, items: Sequence[QueuedInput]) -> None:
        """A turn took these steered messages at a step boundary (``loop.steering``)."""
        ...


@dataclass(frozen=True, slots=True)
class Opening:
    """What an input adds as its turn begins."""

    kind: str  # the turn's kind: "user", "resume", "approval", "background", "regenerate"
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
    continues: bool = False  # a turn handed over (``ostinato.handover``): nothing to write


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
    fork: Fork | None = None,
) -> Opening:
    """A user message: routed to a skill (the one the request named, if it did); what the
    conversation waited on is answered (the user moved on); the turn-zero seed calls are
    worked out. The request's ``instructions`` are kept only if the skill allows them.
    A row that hands on background work's result (``metadata.background_run_id``, by
    ``ostinato.background``) begins a ``background`` turn. With a ``fork`` (an edit, a
    regenerate: ``ostinato.branching``) the branch is moved there after what the old
    branch waited on is answered, and a regenerate adds no row: its question is there."""
    routed = await _route(
        parts.router, conversation, fork.window.rows if fork else history, message, skill
    )
    route = await pinned_route(parts, conversation.id, routed)
    if instructions is not None:
        allowed = route.skill.agent.request_instructions
        route = replace(route, detail={**route.detail, "instructions": allowed})
        instructions = instructions if allowed else None
    files = files_of(message)
    seeds = seed_calls(message, files, recall=parts.seed_recall)
    pending = await pending_approvals(parts.store, conversation.id, history)
    ops, _ = waiting_answers(conversation.id, history, pending, message.text)
    if fork is not None:
        ops.append(MoveBranch(conversation.id, fork.at))
    stored = as_stored(message)
    kept = {k: v for k, v in stored.metadata.items() if k != STEER}  # not steered: a turn
    message = Message("user", stored.blocks, stored.hidden, {**kept, "route": route.record})
    if fork is None or not fork.regenerate:
        ops.append(AppendMessage(conversation.id, message, turn_id))
    if queued is not None:
        ops.append(TakeQueued(queued.id))
        observe.queued(-1)
    background = message.metadata.get(BACKGROUND)
    return Opening(
        "regenerate" if fork and fork.regenerate else "background" if background else "user",
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
    if "removed" in route.detail:
        return await _removed_route(parts, conversation_id, str(route.detail["removed"]))
    if pinning is None or "version" in route.detail:
        return route
    skill, number = await pinning.resolve(conversation_id, route.skill)
    return replace(route, skill=skill, detail={**route.detail, "version": number})


def open_with_approval(parts: Parts, history: list[Message], approval: Approval) -> Opening:
    """An approval decided after its turn had stopped: the new turn runs its call first."""
    use = open_tool_use(history, approval.tool_use_id)
    if use is None:
        raise Conflict(f"the call {approval.tool_use_id!r} was already answered")
    route = resumed_route(parts.router, history)
    return Opening("approval", route, [], carried=[(use, approval.turn_id)])


def resumed_route(router: Router, history: list[Message]) -> Route:
    """A resumed turn keeps the skill of the turn it continues; one a reload removed is
    marked (``removed``) for ``pinned_route`` to find the version the conversation runs."""
    name = last_skill(history)
    skill = router.get(name)
    if skill is not None:
        return Route(skill, "resumed")
    if name is not None:
        return Route(router.default, "default", detail={"removed": name})
    return Route(router.default, "default")


async def _removed_route(parts: Parts, conversation_id: str, name: str) -> Route:
    """A paused conversation whose agent a reload removed resumes under the version it is
    pinned to; with none kept (it follows the latest, or nothing is versioned) it is
    refused, never carried on by another agent."""
    pinning = parts.pinning
    number = None
    if pinning is not None:
        number = (await pinning.store.conversation_versions(conversation_id)).get(name)
    skill = await pinning.skill(name, number) if pinning is not None and number else None
    if skill is None:
        raise Conflict(
            f"this conversation waits under the agent {name!r}, which the configuration no "
            "longer has, and it is pinned to no version of it: add the agent again, or "
            "cancel what waits (POST .../cancel) and send a new message"
        )
    return Route(skill, "resumed", detail={"version": number})


async def pending_approvals(
    store: Store, conversation_id: str, history: list[Message]
) -> list[Approval]:
    """The approvals still pending in a conversation whose newest turn has open calls."""
    if not open_tool_uses(history):
        return []
    return await store.list_approvals(conversation_id, pending_only=True)


async def open_input(
    parts: Parts,
    conversation: Conversation,
    window: HistoryWindow,
    turn_id: str,
    submitted: Input,
    history_limit: int,
) -> tuple[Opening, HistoryWindow]:
    """The opening of the turn an input causes, and the history it begins from: the
    conversation's current branch, or, for an edit or a regenerate, the branch it forks."""
    history = window.rows
    match submitted:
        case NewMessage(message=message, queued=queued, client_message_id=client_id):
            fork = await fork_for(parts.store, message, conversation.id, history_limit)
            opening = await open_with_message(
                parts,
                conversation,
                history,
                turn_id,
                message,
                queued=queued,
                client_message_id=client_id,
                skill=submitted.skill,
                instructions=submitted.instructions,
                fork=fork,
            )
            return opening, fork.window if fork else window
        case CardAnswer(tool_use_id=tool_use_id, result=result):
            ops = card_answer(conversation.id, history, tool_use_id, result, turn_id)
            route = resumed_route(parts.router, history)
            return Opening("resume", route, ops, exact=True), window
        case ApprovalOutcome(approval=approval):
            return open_with_approval(parts, history, approval), window
        case Continued(turn=turn):  # handed over by a server that shut down
            route = resumed_route(parts.router, history)
            return Opening(turn.kind, route, [], continues=True), window
