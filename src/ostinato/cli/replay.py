"""Replay: re-run a conversation's stored turns through the loop and report divergence.

Each stored turn is re-run on its own fresh in-memory store holding the rows that came
before it, with a ``ScriptedModel`` that plays back the turn's model calls: its stored
assistant messages (each one a step; text, thinking and tool_use blocks as model events,
tool_use ids kept), leaving out the rows no model call wrote (the hidden turn-zero seed
step, the fixed sentence stored when a wrap-up call failed, which becomes that failure).
The rows the re-run writes, hidden ones included, are compared with the stored ones by
role, blocks and hidden flag (ids, timestamps and metadata such as metrics are ignored;
the ids of seed calls, new on every run, are compared by their order), and so is the stop
reason. A turn is OK when everything matches, DIVERGED at the first difference, and
SKIPPED when it cannot be replayed (it was cancelled, interrupted or is still running: its
end depended on something outside the model's outputs).

The turns are replayed with the deployment's configuration (``ostinato.toml``, as
``serve`` reads it): its tools (built-ins, memory, OpenAPI and MCP sources), its agents
(each turn with the agent its route recorded, so no router call is made again) and its
tool switches. Tools run for real, except the ones named in ``recorded``: those give back
the result stored for the same call. By default that is ``clock`` and the memory tools,
whose output depends on when they run; any other tool whose output changed since the
conversation was recorded shows up as a divergence, which is the point.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TextIO

from ostinato.agents import AgentConfig
from ostinato.errors import ModelError, NotFound, ToolError
from ostinato.messages import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    blocks_to_json,
)
from ostinato.models.base import (
    ModelEvent,
    Stop,
    TextDelta,
    ThinkingDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from ostinato.models.scripted import ScriptedModel, ScriptError, Step, error_step
from ostinato.runtime import PROTECTED_TOOLS, Runtime
from ostinato.skills import Router, Skill
from ostinato.store import open_store
from ostinato.store.answered import call_turns
from ostinato.store.base import AppendMessage, Conversation, CreateConversation, Store, Turn
from ostinato.store.memory import MemoryStore
from ostinato.tools.base import Tool, ToolContext
from ostinato.tools.builtins import default_registry
from ostinato.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from ostinato.config import Config

RECORDED_BY_DEFAULT = frozenset({"clock", "recall", "remember", "forget", "memory_conflicts"})
UNREPLAYABLE = {"cancelled", "interrupted"}


@dataclass(frozen=True, slots=True)
class TurnReplay:
    turn_id: str
    outcome: Literal["ok", "diverged", "skipped"]
    rows: int  # stored rows the turn wrote after its user message
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class ReplayReport:
    conversation_id: str
    turns: list[TurnReplay]

    @property
    def identical(self) -> bool:
        return all(t.outcome != "diverged" for t in self.turns)


# --- the recorded model and tools ----------------------------------------------------


def step_for(message: Message) -> Step:
    """The model call that produced a stored assistant message."""
    events: list[ModelEvent] = []
    for index, block in enumerate(message.blocks):
        if isinstance(block, TextBlock):
            events.append(TextDelta(block.text, index, block.provider_data))
        elif isinstance(block, ThinkingBlock):
            events.append(ThinkingDelta(block.text, block.signature, index, block.provider_data))
        elif isinstance(block, ToolUseBlock):
            events.append(ToolCallStart(index, block.id, block.name, block.provider_data))
            events.append(ToolCallEnd(index, input=block.input))
    return Step((*events, Usage(), Stop("tool_use" if message.tool_uses else "end_turn")))


def recorded_model(rows: Sequence[Message], turn: Turn | None) -> ScriptedModel:
    """The turn's model calls, in order: one step per assistant row a model call wrote;
    a wrap-up call that failed (its fixed sentence stored instead) and a failed turn's
    last call fail again."""
    steps: list[Step] = []
    for message in rows:
        if message.role != "assistant" or message.metadata.get("seed"):
            continue  # the seed step is the loop's own, not a model call
        failure = message.metadata.get("wrap_up_error")
        if failure is not None:
            steps.append(error_step(ModelError(str(failure))))
        else:
            steps.append(step_for(message))
    if turn is not None and turn.stop_reason == "failed":
        steps.append(error_step(ModelError(turn.error or "the model call failed")))
    return ScriptedModel(steps, name="replay:recorded")


SeedResults = Sequence[tuple[ToolUseBlock, ToolResultBlock]]


def recorded_results(rows: Sequence[Message]) -> tuple[dict[str, ToolResultBlock], SeedResults]:
    """The stored result of every call by its id, and each seed call with its result (a
    seed call's id is new on every run: it is found by its name and arguments)."""
    by_id = {b.tool_use_id: b for r in rows for b in r.tool_results}
    seeds = [
        (use, by_id[use.id])
        for row in rows
        if row.metadata.get("seed")
        for use in row.tool_uses
        if use.id in by_id
    ]
    return by_id, seeds


def _seed_result(
    seeds: SeedResults, name: str, arguments: dict[str, Any]
) -> ToolResultBlock | None:
    """The stored result of the seed call of ``name`` whose arguments these are (the
    validated ones: with the defaults the stored call left out)."""
    for use, result in seeds:
        if use.name == name and all(arguments.get(k) == v for k, v in use.input.items()):
            return result
    return None


def recorded_tools(
    tools: ToolRegistry,
    results: dict[str, ToolResultBlock],
    recorded: Collection[str],
    seeds: SeedResults = (),
) -> ToolRegistry:
    """``tools``, with each tool named in ``recorded`` answering from ``results`` (a seed
    call from ``seeds``, by its name and arguments)."""

    def playback(tool: Tool) -> Tool:
        async def run(arguments: dict[str, Any], context: ToolContext) -> str:
            result = results.get(context.tool_use_id)
            if result is None:
                result = _seed_result(seeds, tool.name, arguments)
            if result is None:
                raise ToolError(f"replay: no stored result for tool call {context.tool_use_id}")
            if result.is_error:
                raise ToolError(result.text)
            return result.text

        return dataclasses.replace(tool, run=run)

    return ToolRegistry(playback(t) if t.name in recorded else t for t in tools)


# --- comparing -----------------------------------------------------------------------


def _seed_names(rows: Sequence[Message]) -> dict[str, str]:
    """Seed call ids (new on every run) by their order: ``seed_1``, ``seed_2`` ..."""
    names: dict[str, str] = {}
    for row in rows:
        for block in row.blocks:
            use_id = getattr(block, "id", None) or getattr(block, "tool_use_id", None)
            if isinstance(use_id, str) and use_id.startswith("seed_") and use_id not in names:
                names[use_id] = f"seed_{len(names) + 1}"
    return names


def _shape(message: Message, names: dict[str, str] | None = None) -> dict[str, Any]:
    blocks = blocks_to_json(message.blocks)
    for block in blocks:
        for key in ("id", "tool_use_id"):
            if names and block.get(key) in names:
                block[key] = names[block[key]]
    return {"role": message.role, "blocks": blocks, "hidden": message.hidden}


def _show(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def first_difference(stored: Sequence[Message], replayed: Sequence[Message]) -> str | None:
    mine, theirs = _seed_names(stored), _seed_names(replayed)
    for want, got in zip(stored, replayed, strict=False):
        if _shape(want, mine) != _shape(got, theirs):
            return (
                f"row seq {want.seq}: stored {_show(_shape(want, mine))}\n"
                f"      replayed {_show(_shape(got, theirs))}"
            )
    if len(stored) > len(replayed):
        extra = stored[len(replayed)]
        return f"row seq {extra.seq} was stored but not written on replay: {_show(_shape(extra))}"
    if len(replayed) > len(stored):
        return f"the replay wrote an extra row: {_show(_shape(replayed[len(stored)]))}"
    return None


# --- replaying -----------------------------------------------------------------------


@dataclass(slots=True)
class Setup:
    """What the turns are replayed with: the deployment's tools, agents and switches."""

    tools: ToolRegistry
    router: Router | None = None  # the configured agents; None: one agent, ``agent``
    agent: AgentConfig | None = None
    disabled: frozenset[str] = frozenset()
    protected: frozenset[str] = PROTECTED_TOOLS

    def skill_for(self, user: Message) -> Skill | None:
        """The agent the turn's route recorded (``None``: the default agent)."""
        if self.router is None:
            return None
        route = user.metadata.get("route")
        named = route.get("skill") if isinstance(route, dict) else None
        return self.router.get(named if isinstance(named, str) else None) or self.router.default


@asynccontextmanager
async def configured(config: Config, owner: str | None) -> AsyncIterator[Setup]:
    """The setup ``serve`` would make of ``config`` for ``owner``'s conversations: the
    same tool sources (MCP servers started, and stopped at the end), agents and switches.
    Memory tools are bound to a scratch store: a replay never writes the real one."""
    from ostinato.approvals import ApprovalPolicy
    from ostinato.deployment import skills_of
    from ostinato.memory.facts import Memory
    from ostinato.sources import mcp_clients, tool_sources
    from ostinato.tools.mounting import Mount

    policy = ApprovalPolicy(frozenset(config.approvals.ask_for), config.approvals.timeout)
    skills = skills_of(config, policy)
    default = next((s for s in skills if s.id == config.default_agent().id), skills[0])
    clients = mcp_clients(config)
    try:
        memory = Memory(MemoryStore(), None, capacity=config.memory.capacity)
        mount = Mount(await tool_sources(config, memory, clients, os.environ))
        yield Setup(
            (await mount.registry(owner)).registry,
            Router(skills, default=default),
            disabled=frozenset(config.tools.disabled),
            protected=frozenset(config.tools.protected),
        )
    finally:
        if clients is not None:
            await clients.aclose()


def _copied(cid: str, rows: list[Message], index: int) -> AppendMessage:
    """Row ``index`` appended again, its results keyed to the turns of their calls."""
    row = rows[index]
    calls = [r.tool_use_id for r in row.tool_results]
    made = call_turns(rows[:index], calls, row.turn_id) if calls else {}
    return AppendMessage(cid, _fresh(row), row.turn_id, made)


def _fresh(message: Message) -> Message:
    return Message(message.role, message.blocks, message.hidden, message.metadata)


async def replay_conversation(
    store: Store,
    conversation_id: str,
    *,
    tools: ToolRegistry | None = None,
    agent: AgentConfig | None = None,
    recorded: Collection[str] = RECORDED_BY_DEFAULT,
    config: Config | None = None,
) -> ReplayReport:
    """Replay every stored turn of the conversation; raises ``NotFound`` if it is unknown.
    With ``config``, the turns are replayed as ``serve`` runs them with it (``tools`` and
    ``agent`` then go unused); without it, with ``tools`` (default: the built-ins) and one
    agent (``agent``)."""
    conversation = await store.get_conversation(conversation_id)
    if conversation is None:
        raise NotFound(f"no conversation with id {conversation_id!r}")
    if config is None:
        setup = Setup(tools or default_registry(), agent=agent)
        return await _replay_all(store, conversation, setup, recorded)
    async with configured(config, conversation.owner) as setup:
        return await _replay_all(store, conversation, setup, recorded)


async def _replay_all(
    store: Store, conversation: Conversation, setup: Setup, recorded: Collection[str]
) -> ReplayReport:
    rows = await store.list_messages(conversation.id, include_hidden=True)
    turns = {t.id: t for t in await store.list_turns(conversation.id)}
    order = list(dict.fromkeys(r.turn_id for r in rows if r.turn_id))
    results, seeds = recorded_results(rows)
    setup.tools = recorded_tools(setup.tools, results, recorded, seeds)
    report = ReplayReport(conversation.id, [])
    seed = dataclasses.replace(conversation, state="idle")
    asked_again = _asked_again(rows, turns)
    for turn_id in order:
        mine = [r for r in rows if r.turn_id == turn_id]
        before = [r for r in rows if (r.seq or 0) < (mine[0].seq or 0)]
        turn = turns.get(turn_id)
        if all(r.seq in asked_again for r in mine):
            why = "its question was answered again on this branch (a regenerate)"
            report.turns.append(TurnReplay(turn_id, "skipped", 0, why))
            continue
        if turn_id in asked_again.values():
            before, mine = before[:-1], [before[-1], *mine]  # it answered that question again
        report.turns.append(await _replay_turn(turn, turn_id, seed, before, mine, setup))
    return report


def _asked_again(rows: list[Message], turns: dict[str, Turn]) -> dict[int, str]:
    """The questions a regenerate on this branch answered again: their seq, and the id of
    the regenerate's turn (it is replayed as that question's turn)."""
    out: dict[int, str] = {}
    for index, row in enumerate(rows):
        turn = turns.get(row.turn_id or "")
        first = index > 0 and rows[index - 1].turn_id != row.turn_id
        if turn is not None and turn.kind == "regenerate" and first:
            question = rows[index - 1]
            if question.role == "user" and question.seq is not None:
                out[question.seq] = turn.id
    return out


async def _replay_turn(
    turn: Turn | None,
    turn_id: str,
    conversation: Conversation,
    before: list[Message],
    mine: list[Message],
    setup: Setup,
) -> TurnReplay:
    user, stored = mine[0], mine[1:]
    if turn is None or turn.status != "finished" or turn.stop_reason in UNREPLAYABLE:
        why = turn.stop_reason or turn.status if turn else "no turn record"
        return TurnReplay(turn_id, "skipped", len(stored), f"the turn ended {why}")
    if user.role != "user":
        return TurnReplay(turn_id, "skipped", len(stored), "the turn did not start with a user row")
    fresh = MemoryStore()
    await fresh.write(
        CreateConversation(conversation),
        *(_copied(conversation.id, before, i) for i in range(len(before))),
    )
    model = recorded_model(stored, turn)
    skill = setup.skill_for(user)
    runtime = Runtime(
        fresh,
        model=model,
        tools=setup.tools,
        agent=skill.agent if skill else setup.agent,
        router=Router([skill]) if skill else None,
        models=lambda _: model,  # every tier is the recording
        disabled_tools=setup.disabled,
        protected_tools=setup.protected,
    )
    try:
        result = await runtime.run_turn(conversation.id, _fresh(user))
    except ScriptError as exc:
        detail = f"the loop asked for more model calls than were recorded: {exc}"
        return TurnReplay(turn_id, "diverged", len(stored), detail)
    finally:
        await runtime.close()
    difference = first_difference(stored, result.messages)
    if difference is None and result.stop_reason != turn.stop_reason:
        difference = f"stop reason: stored {turn.stop_reason}, replayed {result.stop_reason}"
    if difference is None and model.remaining:
        difference = f"{model.remaining} recorded model repl(ies) were never asked for"
    outcome: Literal["ok", "diverged"] = "ok" if difference is None else "diverged"
    return TurnReplay(turn_id, outcome, len(stored), difference)


def format_report(report: ReplayReport, recorded: Collection[str]) -> str:
    lines = [f"replay of conversation {report.conversation_id}"]
    if recorded:
        lines.append(f"tool results played back from the record: {', '.join(sorted(recorded))}")
    for number, turn in enumerate(report.turns, 1):
        label = {"ok": "OK", "diverged": "DIVERGED", "skipped": "SKIPPED"}[turn.outcome]
        rows = f"{turn.rows} row{'' if turn.rows == 1 else 's'}"
        lines.append(f"turn {number} ({turn.turn_id}, {rows}): {label}")
        if turn.detail:
            lines.append(f"    {turn.detail}")
    if not report.turns:
        lines.append("no turns to replay")
    diverged = sum(t.outcome == "diverged" for t in report.turns)
    lines.append("identical" if not diverged else f"{diverged} turn(s) diverged")
    return "\n".join(lines)


async def replay(
    conversation_id: str,
    database_url: str | None,
    recorded: Collection[str] = RECORDED_BY_DEFAULT,
    *,
    config: Config | None = None,
    out: TextIO | None = None,
) -> int:
    """The ``ostinato replay`` command: 0 when identical, 1 when diverged, 2 on error."""
    try:
        store = await open_store(database_url)
    except ValueError as exc:
        print(f"ostinato replay: {exc}", file=sys.stderr)
        return 2
    try:
        report = await replay_conversation(store, conversation_id, recorded=recorded, config=config)
    except NotFound as exc:
        print(f"ostinato replay: {exc.message}", file=sys.stderr)
        return 2
    finally:
        await store.close()
    print(format_report(report, recorded), file=out or sys.stdout)
    return 0 if report.identical else 1
