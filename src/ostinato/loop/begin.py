"""Beginning a turn: its skill, tools and model, the commit that announces it, and the
task that drives it.

The runtime reads the conversation and its history window and asks ``loop.opening`` for
the turn's ``Opening`` (what the input adds to the history: a user message, a card's
answer, a decided approval's call, an edit's or a regenerate's move), then ``begin``
freezes the turn's catalog, commits the opening with the turn's row (``turn.started``
first, then each row; ``branch.changed`` before the first row of a moved branch) and
starts a ``TurnDriver``. It works through the store interface and the ``Parts`` it is
given.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ostinato.agents import AgentConfig
from ostinato.approvals import outside_content
from ostinato.attachments import CONTEXT_KEY as ATTACHMENTS
from ostinato.bus import LocalBus
from ostinato.consent import TurnConsent
from ostinato.context.keeper import ContextKeeper
from ostinato.context.window import build as build_window
from ostinato.frames import BranchChanged, MessageCommitted, TurnStarted
from ostinato.loop.after import accounted
from ostinato.loop.driver import TurnDriver, TurnResult
from ostinato.loop.opening import AfterTurn as AfterTurn  # (its home was here)
from ostinato.loop.opening import Opening, Parts, pinned_route
from ostinato.loop.seeding import Seeded, SeedStart, seed_start
from ostinato.loop.steering import Steering
from ostinato.memory.facts import scope_for
from ostinato.messages import Message
from ostinato.models.base import Model
from ostinato.skills import Route, Skill
from ostinato.store.answered import write_answers
from ostinato.store.base import (
    AppendMessage,
    Conversation,
    HistoryWindow,
    SetConversationState,
    StartTurn,
    Store,
    Turn,
    WriteOp,
)
from ostinato.store.tree import Branch
from ostinato.tools import processes, small
from ostinato.tools.processes import CONTEXT_KEY as PROCESSES
from ostinato.tools.registry import ToolCatalog, ToolRegistry
from ostinato.tools.workdir import workdir_for

RUNTIME = "runtime"  # ToolContext.extras keys: the runtime (for sub-agents) and the route
ROUTE = "route"

log = logging.getLogger("ostinato.loop")


@dataclass(frozen=True, slots=True)
class Begun:
    """A turn that has begun: its row, its opening rows, and the task that runs it."""

    turn: Turn
    rows: tuple[Message, ...]
    task: asyncio.Task[TurnResult]
    position: Callable[[], int]  # the seq of the turn's last committed row


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
    model = model or parts.model_for(conversation, skill)
    registry, catalog = await _tools(parts, conversation, skill, model)
    seeding = seed_start(turn, opening.seeds, catalog)
    stored, moved = await _commit_start(parts, turn, opening, seeding)
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
        position=None if stored else moved,  # a regenerate writes no row as it begins
    )
    driver.handing = parts.handing
    driver.steering = Steering(parts.store, parts.steered)
    task = asyncio.create_task(driver.run(), name=f"turn-{turn.id}")
    # Let the task take its first step before anyone can cancel it: a task cancelled
    # before it starts never runs its body, so its teardown would be skipped.
    await asyncio.sleep(0)
    user = _person(turn, stored, window.rows if opening.continues else ())
    # A hidden row is not the person's words (a scheduled prompt's, a trigger's): no
    # after-turn work reads it as theirs.
    if parts.after_turn is not None and user is not None and not user.hidden:
        task.add_done_callback(lambda done: _after(parts, done, conversation, user, consent))
    opened = stored[:-1] if seeding else stored  # the seed row is the driver's
    return Begun(turn, tuple(opened), task, lambda: driver.seq)


def _person(turn: Turn, stored: Sequence[Message], earlier: Sequence[Message]) -> Message | None:
    """The person's message the turn answers, for its after-turn work: the user row it
    stored as it began, or, for a turn handed over (``ostinato.handover``: it stored
    nothing here), the user row the first server stored for it."""
    mine = [*stored, *(r for r in earlier if r.turn_id == turn.id)]
    return next((r for r in mine if r.role == "user"), None)


async def _commit_start(
    parts: Parts, turn: Turn, opening: Opening, seeding: SeedStart | None
) -> tuple[list[Message], int | None]:
    """The turn's start in one write: the opening's rows and ops, the turn's row, the
    conversation ``running``, and the seed calls; announced after it commits. Its rows,
    and the newest seq when a move of the branch came with it (a regenerate's)."""
    if opening.continues:  # a turn handed over goes on: its start is stored
        return [], None
    ops = [
        *opening.ops,
        StartTurn(turn),
        SetConversationState(turn.conversation_id, "running"),
        *(seeding.ops if seeding else ()),
    ]
    results = await _write(parts.store, ops, opening.exact)
    moved = next((r.since for r in results if isinstance(r, Branch)), None)
    rows = announce(
        parts.bus,
        turn.run_id,
        ops,
        results,
        started=turn,
        route=opening.route,
        client_message_id=opening.client_message_id,
        background_run_id=opening.background_run_id,
    )
    return rows, moved


def with_instructions(agent: AgentConfig, instructions: str | None) -> AgentConfig:
    """The agent's settings with a request's addition after its system prompt."""
    if not instructions or not instructions.strip():
        return agent
    prompt = f"{agent.system_prompt.rstrip()}\n\n{instructions.strip()}"
    return replace(agent, system_prompt=prompt)


async def _tools(
    parts: Parts, conversation: Conversation, skill: Skill, model: Model
) -> tuple[ToolRegistry, ToolCatalog]:
    """The tools mounted for the conversation's owner, and the catalog the turn offers
    (fewer built-ins to a model with a small window: ``tools.small``)."""
    mounted = await parts.mount.registry(conversation.owner, conversation.id)
    switched_off = await parts.switched_off(scope_for(conversation.owner, conversation.id))
    window = parts.compactor.catalog.window(model.name)
    known = (tool.name for tool in mounted.registry)
    catalog = mounted.registry.catalog(
        small.allowed_for(window, skill.agent.tools, known),
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
                conversation=conversation,
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
    """Commit ops, then announce: ``turn.started`` first, then each row in seq order (a
    ``branch.changed`` before the first row of a branch the ops moved). A result for a
    call answered meanwhile is left out (a lost race, ``store.answered``) unless
    ``exact``, when it refuses the write (``AlreadyAnswered``)."""
    if not ops:
        return []
    results = await _write(store, ops, exact)
    return announce(bus, run_id, ops, results, started, route, client_message_id, background_run_id)


async def _write(store: Store, ops: Sequence[WriteOp], exact: bool) -> list[Any]:
    """``commit_rows``'s write (``exact``: see there)."""
    return await store.write(*ops) if exact else (await write_answers(store, *ops)).results


def announce(
    bus: LocalBus,
    run_id: str,
    ops: Sequence[WriteOp],
    results: Sequence[Any],
    started: Turn | None = None,
    route: Route | None = None,
    client_message_id: str | None = None,
    background_run_id: str | None = None,
) -> list[Message]:
    """Publish what a write of ``ops`` committed (``commit_rows``); its rows."""
    rows = [r for r in results if isinstance(r, Message)]
    moved = next((r for r in results if isinstance(r, Branch)), None)
    cid = next(
        op.conversation_id for op in ops if isinstance(op, SetConversationState | AppendMessage)
    )
    # turn.started comes first and says where the turn begins: after the row before
    # its own rows (non-decreasing seq on the stream).
    before = (rows[0].seq or 1) - 1 if rows else moved.since if moved else bus.last_seq(cid)
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
        if moved is not None and (row.seq or 0) > moved.since:
            publish_branch(bus, cid, run_id, moved)
            moved = None
        echo = client_message_id if row.role == "user" else None
        bus.publish(
            cid,
            MessageCommitted(run_id=run_id, seq=row.seq or 0, message=row, client_message_id=echo),
        )
    if moved is not None:
        publish_branch(bus, cid, run_id, moved)
    return rows


def publish_branch(bus: LocalBus, conversation_id: str, run_id: str, branch: Branch) -> None:
    """Tell every surface the conversation's branch moved (``branch.changed``)."""
    ranges = [list(r) for r in branch.ranges]
    frame = BranchChanged(
        run_id=run_id, seq=branch.since, tip=branch.tip, ranges=ranges, since=branch.since
    )
    bus.publish(conversation_id, frame)
