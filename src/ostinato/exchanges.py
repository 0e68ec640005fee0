"""An exchange: the turn a message began and the turns that continued it. Pure.

What other protocols call a task (A2A, MCP) or a run is, in ostinato, one message and
what it caused. That may take several turns: a question card ends its turn ``paused``
and the answer continues it in a ``resume`` turn; an approval decided after its turn
stopped waiting (a restart) continues it in an ``approval`` turn. An exchange is the
turn that a message (or a scheduled prompt) began, and every continuing turn after it,
up to the next turn a message began.

``status`` reads an exchange's state from the store's facts, in this order:

1. its last turn runs: ``input_required`` when an approval of that turn waits, else
   ``working``;
2. its last turn ended ``paused``: ``input_required`` while the conversation is still
   paused on it (no later exchange began), else ``cancelled`` (what it waited on was
   dismissed by a later message, or cancelled);
3. ``end_turn`` and ``budget_exhausted`` (which ends with a wrap-up sentence):
   ``completed``;
4. ``cancelled``: ``cancelled``;
5. ``failed``, ``crashed`` (the repetition backstop), ``interrupted`` (a server crash)
   and ``spend_limit`` (the owner's budget is spent; its reply says when it resets):
   ``failed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from ostinato.store.base import ConversationState, Turn

CONTINUING = frozenset({"resume", "approval"})
"""Kinds of turn that continue the exchange before them instead of beginning one."""

Status: TypeAlias = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: frozenset[Status] = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True, slots=True)
class Exchange:
    """``turns``: the first turn (its id is the exchange's) and those continuing it, in
    order; ``later``: whether another exchange began after it."""

    turns: tuple[Turn, ...]
    later: bool

    @property
    def id(self) -> str:
        return self.turns[0].id

    @property
    def first(self) -> Turn:
        return self.turns[0]

    @property
    def last(self) -> Turn:
        return self.turns[-1]

    @property
    def turn_ids(self) -> frozenset[str]:
        return frozenset(t.id for t in self.turns)


def ordered(turns: list[Turn]) -> list[Turn]:
    """A conversation's turns in the order they began."""
    return sorted(turns, key=lambda t: (t.started_at, t.id))


def exchanges(turns: list[Turn]) -> list[Exchange]:
    """Every exchange of a conversation, oldest first (continuing turns with no turn
    before them are left out: they continue nothing this conversation holds)."""
    groups: list[list[Turn]] = []
    for turn in ordered(turns):
        if turn.kind in CONTINUING and groups:
            groups[-1].append(turn)
        elif turn.kind not in CONTINUING:
            groups.append([turn])
    return [Exchange(tuple(g), i < len(groups) - 1) for i, g in enumerate(groups)]


def exchange_of(turns: list[Turn], turn_id: str) -> Exchange | None:
    """The exchange that ``turn_id`` begins, or ``None`` (no such turn, or one that
    continues another)."""
    for exchange in exchanges(turns):
        if exchange.id == turn_id:
            return exchange
    return None


def status(exchange: Exchange, conversation: ConversationState, approval_waits: bool) -> Status:
    """The exchange's state (see the module's rules). ``approval_waits``: an approval
    asked by the exchange's last turn is still pending."""
    last = exchange.last
    if last.status == "running":
        return "input_required" if approval_waits else "working"
    if last.stop_reason == "paused":
        waiting = conversation == "paused" and not exchange.later
        return "input_required" if waiting else "cancelled"
    return ended(last.stop_reason or "failed")


def ended(stop_reason: str) -> Status:
    """The state a turn's stop reason (other than ``paused``) leaves its exchange in
    (rules 3 to 5)."""
    match stop_reason:
        case "end_turn" | "budget_exhausted":
            return "completed"
        case "cancelled":
            return "cancelled"
        case _:
            return "failed"
