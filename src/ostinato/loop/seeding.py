"""Turn-zero seeds: the calls a turn runs before its first model call (a memory recall
keyed on the user's message, one read per attached file; ``loop.setup.seed_calls``).

Their hidden assistant row and their started records are committed with the turn's
start (``seed_start``, one write fewer before the first model call); the driver then runs
them (``run_seeds``) and commits their results as a hidden tool row of the turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ostinato.loop.record import TurnRecord, start_op
from ostinato.loop.running import ToolRunner
from ostinato.messages import Message, ToolUseBlock
from ostinato.store.base import AppendMessage, StartToolCall, Turn, WriteOp, utcnow
from ostinato.tools.registry import ToolCatalog


@dataclass(frozen=True, slots=True)
class SeedStart:
    """The turn-zero calls as written with the turn's start: their hidden row, then their
    started records."""

    row: AppendMessage
    starts: tuple[StartToolCall, ...]

    @property
    def ops(self) -> tuple[WriteOp, ...]:
        return (self.row, *self.starts)


@dataclass(frozen=True, slots=True)
class Seeded:
    """The turn-zero calls, committed with the turn's start (``loop.begin``): their
    hidden row as stored and their started records. The driver runs them first."""

    row: Message
    starts: tuple[StartToolCall, ...]


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


async def run_seeds(
    record: TurnRecord, runner: ToolRunner, seeds: tuple[ToolUseBlock, ...]
) -> None:
    """Run the seed calls (committed with the turn's start) and commit their results: the
    calls and their results are hidden ``read`` rows of the turn's working set."""
    for call in seeds:
        record.started(call, "read")
    runs = await runner.run(seeds, {})
    await record.commit_results(runs, None, hidden=True)
