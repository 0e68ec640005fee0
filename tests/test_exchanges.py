"""Exchanges (ostinato.exchanges): which turns belong to a message's exchange, and the
state each combination of facts puts it in, one case per rule."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from ostinato.exchanges import exchange_of, exchanges, status
from ostinato.store.base import Turn, utcnow

START = utcnow()


def turn(n: int, kind: str = "user", reason: str | None = "end_turn") -> Turn:
    running: Any = "running" if reason is None else "finished"
    return Turn(f"t{n}", "c", f"r{n}", running, START + timedelta(seconds=n), kind,
                stop_reason=reason)  # type: ignore[arg-type]  # fmt: skip


def test_continuing_turns_join_the_exchange_before_them() -> None:
    turns = [turn(3, "resume"), turn(1), turn(2, reason="paused"), turn(4, "approval"), turn(5)]
    found = exchanges(turns)
    assert [[t.id for t in e.turns] for e in found] == [["t1"], ["t2", "t3", "t4"], ["t5"]]
    assert [e.later for e in found] == [True, True, False]
    assert exchange_of(turns, "t3") is None  # a continuing turn names no exchange
    orphan = exchanges([turn(1, "resume"), turn(2)])
    assert [e.id for e in orphan] == ["t2"]


@pytest.mark.parametrize(
    ("turns", "conversation", "approval_waits", "expected"),
    [
        ([turn(1, reason=None)], "running", False, "working"),  # rule 1
        ([turn(1, reason=None)], "running", True, "input_required"),
        ([turn(1, reason="paused")], "paused", False, "input_required"),  # rule 2
        ([turn(1, reason="paused"), turn(2)], "idle", False, "cancelled"),  # dismissed
        ([turn(1, reason="paused")], "idle", False, "cancelled"),  # cancelled while paused
        ([turn(1, reason="paused"), turn(2, "resume", None)], "running", False, "working"),
        ([turn(1)], "idle", False, "completed"),  # rule 3
        ([turn(1, reason="budget_exhausted")], "idle", False, "completed"),
        ([turn(1, reason="cancelled")], "idle", False, "cancelled"),  # rule 4
        ([turn(1, reason="failed")], "failed", False, "failed"),  # rule 5
        ([turn(1, reason="crashed")], "idle", False, "failed"),
        ([turn(1, reason="interrupted")], "idle", False, "failed"),
        ([turn(1, reason="spend_limit")], "idle", False, "failed"),
    ],
)
def test_the_state_of_an_exchange(
    turns: list[Turn], conversation: Any, approval_waits: bool, expected: str
) -> None:
    found = exchange_of(turns, "t1")
    assert found is not None
    assert status(found, conversation, approval_waits) == expected
