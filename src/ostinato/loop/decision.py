"""The step decision: what happens after a model reply or a round of tools. Pure.

Everything that decides how a turn proceeds lives here, as two functions from
``(LoopState, outcome)`` to ``(LoopState, NextStep)``; the driver performs the effects.
``NextStep`` is a closed union, so the driver handles every case with ``match`` and
``assert_never``.

Rules, in the order they are checked after a model reply:

1. The same non-empty reply text three model calls running ends the turn ``crashed``
   (the person has that text).
2. No tool calls: the turn ends, ``end_turn``; after a wrap-up call, with the stop that
   called for it (``budget_exhausted``, or ``crashed`` after a repetition).
3. The same tool with the same arguments three calls running is not run again (each call
   of the step gets a result saying why) and the turn is stopping ``crashed``: the next
   call is a wrap-up call. During a wrap-up call it ends the turn at once.
4. Tool calls during a wrap-up call are not run; the turn ends with the stop that called
   for the wrap-up.
5. Otherwise the tools run (a broken call, cut off or unparseable, gets an error result).
   A call to a ``ui`` tool is not run: a person answers it, and once the other calls of
   the step have run, the turn ends ``paused`` (one such card at a time).

After a round of tools, in this order: the second time a tool returns the same error this
turn, a one-time note asks the model to re-check its inputs or ask the user; a ``ui`` call
waiting ends the turn ``paused``; a turn stopping for a repetition makes its wrap-up call
(with a note saying why); when the model-call budget is spent, the next call is the
wrap-up call. A wrap-up call has tools off, so the person always gets a sentence (if it
fails, the driver stores a fixed one: ``WRAP_UP_FALLBACK``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TypeAlias

from ostinato.messages import ToolUseBlock
from ostinato.models.assembly import ModelReply
from ostinato.store.base import TurnStopReason

REPEAT_LIMIT = 3
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))  # call signatures

NUDGE = (
    "Note: a tool has now returned the same error twice in this turn. Re-check the "
    "arguments against the tool's description before calling it again; if it still "
    "fails, stop and ask the user."
)
REPEATED_CALL = (
    "not run: the same tool was called with the same arguments {n} times running, so "
    "the turn was stopped"
)
REPEATED_TEXT = "not run: the same reply was repeated {n} times running, so the turn was stopped"
OUT_OF_CALLS = "not run: this turn used all of its model calls"
TOOLS_OFF = "not run: the turn was stopped for repeating itself, and tools are off"
STOPPED_FOR_REPEATING = (
    "Note: the turn was stopped because the same tool call was repeated without progress; "
    "tools are off now. Tell the user in a sentence or two what you found and what stopped "
    "you."
)
WRAP_UP_FALLBACK: dict[TurnStopReason, str] = {
    "crashed": (
        "I stopped because I kept repeating the same step without making progress. "
        "Tell me how you would like to go on."
    ),
    "budget_exhausted": (
        "I stopped because this turn used all of its model calls before I could finish. "
        "Tell me how you would like to go on."
    ),
}
"""The sentence stored when a wrap-up call fails, by the stop that called for it."""
ONE_CARD = "not run: only one question can wait for the user at a time; ask it after this one"


@dataclass(slots=True)  # not frozen: made every step (docs/performance.md)
class LoopState:
    max_model_calls: int
    model_calls: int = 0
    wrapping_up: bool = False
    last_call: str = ""
    call_run: int = 0
    last_text: str = ""
    text_run: int = 0
    errors_seen: frozenset[str] = frozenset()
    nudged: bool = False
    ui_tools: frozenset[str] = frozenset()  # calls to these pause the turn for a person
    stopping: TurnStopReason | None = None  # decided; the wrap-up call comes first


@dataclass(slots=True)  # not frozen: made every step (docs/performance.md)
class ToolOutcome:
    """What the decision needs to know about one finished tool call."""

    name: str
    error: str | None = None


# --- next steps ----------------------------------------------------------------------


@dataclass(slots=True)  # not frozen: made every step (docs/performance.md)
class CallModel:
    tools_off: bool = False
    note: str | None = None  # appended to the tool results before the call


@dataclass(slots=True)  # not frozen: made every step (docs/performance.md)
class RunTools:
    calls: tuple[ToolUseBlock, ...]
    broken: dict[str, str]  # tool_use id -> why it is not run
    awaiting: str | None = None  # a ui call: a person answers it; the turn then pauses


@dataclass(frozen=True, slots=True)
class Finish:
    stop_reason: TurnStopReason
    unanswered: dict[str, str]  # tool_use id -> the synthetic result it gets


NextStep: TypeAlias = CallModel | RunTools | Finish


def after_reply(state: LoopState, reply: ModelReply) -> tuple[LoopState, NextStep]:
    calls = tuple(reply.tool_uses)
    last_text, text_run = state.last_text, state.text_run
    text = reply.message.text.strip()
    if text:
        text_run = text_run + 1 if text == last_text else 1
        last_text = text
    last_call, call_run = state.last_call, state.call_run
    repeated = 0
    for call in calls:
        signature = call.name + "\x00" + _CANONICAL.encode(call.input)
        call_run = call_run + 1 if signature == last_call else 1
        last_call = signature
        repeated = max(repeated, call_run)
    state = LoopState(  # every field named: this runs once per model call
        max_model_calls=state.max_model_calls,
        model_calls=state.model_calls + 1,
        wrapping_up=state.wrapping_up,
        last_call=last_call,
        call_run=call_run,
        last_text=last_text,
        text_run=text_run,
        errors_seen=state.errors_seen,
        nudged=state.nudged,
        ui_tools=state.ui_tools,
        stopping=state.stopping,
    )
    if text and text_run >= REPEAT_LIMIT:
        return state, Finish("crashed", _refuse(calls, REPEATED_TEXT.format(n=text_run)))
    wrap_up_stop = state.stopping or "budget_exhausted"
    if not calls:
        return state, Finish(wrap_up_stop if state.wrapping_up else "end_turn", {})
    if repeated >= REPEAT_LIMIT:
        refused = _refuse(calls, REPEATED_CALL.format(n=repeated))
        if state.wrapping_up:
            return state, Finish(state.stopping or "crashed", refused)
        return replace(state, wrapping_up=True, stopping="crashed"), RunTools(calls, refused)
    if state.wrapping_up:
        why = TOOLS_OFF if state.stopping else OUT_OF_CALLS
        return state, Finish(wrap_up_stop, _refuse(calls, why))
    broken = dict(reply.broken_calls)
    awaiting = None
    for call in calls:
        if call.name in state.ui_tools and call.id not in broken:
            if awaiting is None:
                awaiting = call.id
            else:
                broken[call.id] = ONE_CARD
    return state, RunTools(calls, broken, awaiting)


def after_tools(
    state: LoopState, outcomes: tuple[ToolOutcome, ...], *, awaiting: str | None = None
) -> tuple[LoopState, NextStep]:
    errors = [o.name + "\x00" + o.error for o in outcomes if o.error is not None]
    note = None
    if errors:
        seen = set(state.errors_seen)
        nudge = False
        for key in errors:
            nudge = nudge or key in seen
            seen.add(key)
        note = NUDGE if nudge and not state.nudged else None
        state = replace(state, errors_seen=frozenset(seen), nudged=state.nudged or nudge)
    if awaiting is not None:
        return state, Finish("paused", {})
    if state.stopping is not None:
        return state, CallModel(tools_off=True, note=STOPPED_FOR_REPEATING)
    if state.model_calls >= state.max_model_calls:
        return replace(state, wrapping_up=True), CallModel(tools_off=True, note=note)
    return state, CallModel(note=note)


def _refuse(calls: tuple[ToolUseBlock, ...], why: str) -> dict[str, str]:
    return {call.id: why for call in calls}
