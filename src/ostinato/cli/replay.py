"""Replay: re-run a conversation's stored turns through the loop and report divergence.

Each stored turn is re-run on its own fresh in-memory store holding the rows that came
before it, with a ``ScriptedModel`` that plays back the turn's stored assistant messages
(each one a step; text, thinking and tool_use blocks as model events, tool_use ids kept).
The rows the re-run writes are compared with the stored ones by role, blocks and hidden
flag (ids, timestamps and metadata such as metrics are ignored), and so is the stop
reason. A turn is OK when everything matches, DIVERGED at the first difference, and
SKIPPED when it cannot be replayed (it was cancelled, interrupted or is still running: its
end depended on something outside the model's outputs).

Tools run for real, except the ones named in ``recorded``: those give back the result
stored for the same tool_use id. By default that is ``clock``, whose output depends on
when it runs; any other tool whose output changed since the conversation was recorded
shows up as a divergence, which is the point.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TextIO

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
from ostinato.runtime import Runtime
from ostinato.store import open_store
from ostinato.store.base import AppendMessage, Conversation, CreateConversation, Store, Turn
from ostinato.store.memory import MemoryStore
from ostinato.tools.base import Tool, ToolContext
from ostinato.tools.builtins import default_registry
from ostinato.tools.registry import ToolRegistry

RECORDED_BY_DEFAULT = frozenset({"clock"})
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
    steps = [step_for(m) for m in rows if m.role == "assistant"]
    if turn is not None and turn.stop_reason == "failed":
        steps.append(error_step(ModelError(turn.error or "the model call failed")))
    return ScriptedModel(steps, name="replay:recorded")


def recorded_tools(
    tools: ToolRegistry, results: dict[str, ToolResultBlock], recorded: Collection[str]
) -> ToolRegistry:
    """``tools``, with each tool named in ``recorded`` answering from ``results``."""

    def playback(tool: Tool) -> Tool:
        async def run(arguments: dict[str, Any], context: ToolContext) -> str:
            result = results.get(context.tool_use_id)
            if result is None:
                raise ToolError(f"replay: no stored result for tool call {context.tool_use_id}")
            if result.is_error:
                raise ToolError(result.text)
            return result.text

        return dataclasses.replace(tool, run=run)

    return ToolRegistry(playback(t) if t.name in recorded else t for t in tools)


# --- comparing -----------------------------------------------------------------------


def _shape(message: Message) -> dict[str, Any]:
    blocks = blocks_to_json(message.blocks)
    return {"role": message.role, "blocks": blocks, "hidden": message.hidden}


def _show(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def first_difference(stored: Sequence[Message], replayed: Sequence[Message]) -> str | None:
    for want, got in zip(stored, replayed, strict=False):
        if _shape(want) != _shape(got):
            return (
                f"row seq {want.seq}: stored {_show(_shape(want))}\n"
                f"      replayed {_show(_shape(got))}"
            )
    if len(stored) > len(replayed):
        extra = stored[len(replayed)]
        return f"row seq {extra.seq} was stored but not written on replay: {_show(_shape(extra))}"
    if len(replayed) > len(stored):
        return f"the replay wrote an extra row: {_show(_shape(replayed[len(stored)]))}"
    return None


# --- replaying -----------------------------------------------------------------------


def _fresh(message: Message) -> Message:
    return Message(message.role, message.blocks, message.hidden, message.metadata)


async def replay_conversation(
    store: Store,
    conversation_id: str,
    *,
    tools: ToolRegistry | None = None,
    agent: AgentConfig | None = None,
    recorded: Collection[str] = RECORDED_BY_DEFAULT,
) -> ReplayReport:
    """Replay every stored turn of the conversation; raises ``NotFound`` if it is unknown."""
    conversation = await store.get_conversation(conversation_id)
    if conversation is None:
        raise NotFound(f"no conversation with id {conversation_id!r}")
    rows = await store.list_messages(conversation_id, include_hidden=True)
    turns = {t.id: t for t in await store.list_turns(conversation_id)}
    order = list(dict.fromkeys(r.turn_id for r in rows if r.turn_id))
    results = {b.tool_use_id: b for r in rows for b in r.tool_results}
    registry = recorded_tools(tools or default_registry(), results, recorded)
    report = ReplayReport(conversation_id, [])
    for turn_id in order:
        mine = [r for r in rows if r.turn_id == turn_id]
        before = [r for r in rows if (r.seq or 0) < (mine[0].seq or 0)]
        seed = dataclasses.replace(conversation, state="idle")
        report.turns.append(
            await _replay_turn(turns.get(turn_id), turn_id, seed, before, mine, registry, agent)
        )
    return report


async def _replay_turn(
    turn: Turn | None,
    turn_id: str,
    conversation: Conversation,
    before: list[Message],
    mine: list[Message],
    tools: ToolRegistry,
    agent: AgentConfig | None,
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
        *(AppendMessage(conversation.id, _fresh(r), r.turn_id) for r in before),
    )
    model = recorded_model(stored, turn)
    runtime = Runtime(fresh, model=model, tools=tools, agent=agent)
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
    out: TextIO | None = None,
) -> int:
    """The ``ostinato replay`` command: 0 when identical, 1 when diverged, 2 on error."""
    try:
        store = await open_store(database_url)
    except ValueError as exc:
        print(f"ostinato replay: {exc}", file=sys.stderr)
        return 2
    try:
        report = await replay_conversation(store, conversation_id, recorded=recorded)
    except NotFound as exc:
        print(f"ostinato replay: {exc.message}", file=sys.stderr)
        return 2
    finally:
        await store.close()
    print(format_report(report, recorded), file=out or sys.stdout)
    return 0 if report.identical else 1
