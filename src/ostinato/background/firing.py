"""The firing decision: what happens next to a schedule a poller holds. Pure.

A held schedule (``state`` claimed or ran) and what the store shows about its slot
(``Seen``) go in; the next step comes out. ``Step`` is a closed union, so the firer
(``firer``) handles every case with ``match`` and ``assert_never``, performs it, then
looks again; every step is durable before the next is decided, so a process killed
between any two leaves a state another takes up after the lease, never a doubled one.

Rules, in the order they are checked:

1. ``ran``, a reminder whose row is in the conversation: ``Advance`` (delivered, or back
   to due at its next slot).
2. ``ran``, the slot's row is in the conversation and the turn answering it runs (or
   waits in the queue): ``AwaitStageTwo``.
3. ``ran``, that turn ended with something for the person (an answer, a card, the
   person's own cancel), or ``MAX_HANDS`` rows were handed on, or the schedule is a
   ``run`` (an Agent Protocol cron's: that turn is its run, however it ended):
   ``Advance``.
4. ``ran``, that turn stopped without a reply (a crash interrupted it, it failed):
   ``Hand`` again; the new row says the reply was cut off.
5. ``ran``, a reminder whose conversation has a turn running in this process:
   ``WaitForTurn`` (its row would land between a tool call and its result).
6. ``ran``: ``Hand`` the result on (stage two): a reminder's text as an assistant row,
   a prompt's result or a trigger's text as a hidden user row a normal turn answers,
   a run's text as a user row a normal turn answers.
7. ``claimed``, a reminder, a trigger or a run: no work runs first, ``Ran`` with its
   text.
8. ``claimed``, a prompt whose stage one has not begun: ``StartStageOne`` (attempt 1).
9. Stage one is running (its turn, or its row waiting in its conversation's queue):
   ``AwaitStageOne``.
10. Stage one answered (its newest attempt ended with text: ``end_turn``, or the
    sentence of a stop that wraps up, ``budget_exhausted`` and ``crashed``): ``Ran``
    with the answer and that attempt's ``run_id``.
11. Stage one stopped without an answer (a crash interrupted it, it failed, it was
    cancelled, it paused for a person) and fewer than ``MAX_ATTEMPTS`` began:
    ``StartStageOne`` again; the next attempt sees what the one before did.
12. Otherwise ``Ran`` with a sentence saying the work did not finish, and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from ostinato.store.schedules import Schedule

MAX_ATTEMPTS = 2
MAX_HANDS = 2
ANSWERED = frozenset({"end_turn", "budget_exhausted", "crashed"})  # stops with a sentence
DELIVERED = ANSWERED | {"paused", "cancelled"}  # the person has it (or chose not to)
NOT_FINISHED = (
    "The scheduled prompt could not be run in the background: its run stopped "
    "({stop}) {attempts} times without an answer."
)


@dataclass(frozen=True, slots=True)
class StageOne:
    """What the store shows of a prompt's stage one for one slot: how many attempts
    began, and the newest one's state."""

    attempts: int = 0
    running: bool = False
    stop_reason: str | None = None  # how the newest attempt's turn ended
    answer: str | None = None  # its last assistant text, once it ended
    run_id: str | None = None  # the newest attempt's turn's


@dataclass(frozen=True, slots=True)
class StageTwo:
    """What the store shows of the slot's rows in the conversation: how many were
    handed on, and the turn answering the newest."""

    hands: int = 0
    running: bool = False  # its turn runs, or the row waits in the queue
    stop_reason: str | None = None  # how its turn ended
    run_id: str | None = None


@dataclass(frozen=True, slots=True)
class Seen:
    stage_two: StageTwo = StageTwo()
    busy: bool = False  # a turn runs in the conversation, in this process
    stage_one: StageOne = StageOne()


# --- steps ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StartStageOne:
    attempt: int


@dataclass(frozen=True, slots=True)
class AwaitStageOne:
    run_id: str | None  # its turn's, once begun


@dataclass(frozen=True, slots=True)
class AwaitStageTwo:
    run_id: str | None  # its turn's, once begun


@dataclass(frozen=True, slots=True)
class Ran:
    result: str
    run_id: str | None = None  # None: the firing gets a run_id of its own


@dataclass(frozen=True, slots=True)
class WaitForTurn:
    pass


@dataclass(frozen=True, slots=True)
class Hand:
    pass


@dataclass(frozen=True, slots=True)
class Advance:
    pass


Step: TypeAlias = StartStageOne | AwaitStageOne | Ran | WaitForTurn | Hand | AwaitStageTwo | Advance


def next_step(schedule: Schedule, seen: Seen) -> Step:
    if schedule.state == "ran":
        return _stage_two(schedule, seen)
    if schedule.mode != "prompt":
        return Ran(schedule.text)
    one = seen.stage_one
    if one.attempts == 0:
        return StartStageOne(1)
    if one.running:
        return AwaitStageOne(one.run_id)
    if one.stop_reason in ANSWERED and one.answer and one.answer.strip():
        return Ran(one.answer.strip(), one.run_id)
    if one.attempts < MAX_ATTEMPTS:
        return StartStageOne(one.attempts + 1)
    stop = one.stop_reason or "unknown"
    return Ran(NOT_FINISHED.format(stop=stop, attempts=one.attempts), one.run_id)


def _stage_two(schedule: Schedule, seen: Seen) -> Step:
    two = seen.stage_two
    if two.hands:
        if schedule.mode == "reminder":
            return Advance()
        if two.running:
            return AwaitStageTwo(two.run_id)
        if schedule.mode == "run" or two.stop_reason in DELIVERED or two.hands >= MAX_HANDS:
            return Advance()
        return Hand()
    if schedule.mode == "reminder" and seen.busy:
        return WaitForTurn()
    return Hand()
