"""The seam between the write ops (``ops``) and an engine: an ``Executor`` runs named
statements inside the caller's transaction; ``WriteTime`` is one write's time; stored
JSON has one encoding (``dump_json``, kept in ``rows`` beside its decoding)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from ostinato.store.sql.rows import Row, dump_json
from ostinato.store.sql.statements import WriteName


class Executor(Protocol):
    """Runs named statements (``WriteName``) inside the caller's open transaction.

    ``serialise_appends``: lock a conversation's row before allocating a ``seq`` in it,
    so concurrent transactions appending to one conversation take turns (PostgreSQL's
    transactions of several statements). False where nothing else appends meanwhile
    (SQLite's one writer) or where the write is one statement that is redone whole if
    its ``seq`` was taken (``speculate``).
    """

    serialise_appends: bool

    def execute(self, name: WriteName, params: dict[str, Any]) -> int:
        """Run a statement; return how many rows it changed."""
        ...

    def returning(self, name: WriteName, params: dict[str, Any]) -> Any:
        """Run an ``INSERT ... RETURNING x``; return ``x`` of the row, or None if none."""
        ...

    def row(self, name: WriteName, params: dict[str, Any]) -> Row | None:
        """Run a statement that yields rows (``SELECT``, ``... RETURNING``); the first."""
        ...

    def rows(self, name: WriteName, params: dict[str, Any]) -> Sequence[Row]:
        """Run a statement that yields rows; all of them."""
        ...

    def time(self, value: datetime) -> Any:
        """A timestamp as this engine binds it (naive values are taken as UTC)."""
        ...

    def read_time(self, value: Any) -> datetime:
        """A stored timestamp back as an aware UTC datetime."""
        ...


@dataclass(frozen=True, slots=True)
class Pending:
    """What statement ``index``'s ``RETURNING`` will give once it has run (a write planned
    before it runs, ``speculate``), passed through ``pick`` if it has one."""

    index: int
    pick: Callable[[Any], Any] | None = None

    def value(self, returned: Any) -> Any:
        return returned if self.pick is None else self.pick(returned)


def derive(value: Any, pick: Callable[[Any], Any]) -> Any:
    """``pick(value)``, or, for a value still to come (``Pending``), a ``Pending`` that
    will be picked so."""
    if type(value) is Pending:
        return Pending(value.index, pick)
    return pick(value)


@dataclass(slots=True)  # not frozen: made every write, dropped with it (docs/performance.md)
class WriteTime:
    """The time of one ``write()`` call, as a datetime and as the engine binds it."""

    value: datetime
    bound: Any


__all__ = ["Executor", "Pending", "WriteTime", "derive", "dump_json"]
