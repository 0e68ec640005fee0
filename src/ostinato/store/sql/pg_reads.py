"""PostgreSQL reads straight on asyncpg, for the statements the store reads again and again.

A read through SQLAlchemy's execution layer costs about 80 µs of CPU on top of the
driver's 20 (its compiled cache's key, the execution context, the result's processing)
and a pooled connection checked out and in with it. The store's reads are a few dozen
statements built once, at import, and run for every turn: ``RawStatements`` compiles
each such statement once, for asyncpg (its text with ``$n`` parameters, the names they
come from in order, and the values SQLAlchemy bound when it was built), and the store
runs that text on the pooled connection's asyncpg connection, whose prepared statement
cache (on unless the URL says ``statement_cache=off``) saves the parse and plan.

A statement is compiled at its second use, found by ``id``: one built for a single call
dies after it and never comes back, and goes SQLAlchemy's way, whose cache knows it by
its structure; an entry goes with its statement (``by_statement``). A statement whose text alone
would not run it (a list it expands, a type that converts a value on its way out) is
never compiled: it goes SQLAlchemy's way each time. A value a bind type converts on its
way in (a boolean's check) is converted as SQLAlchemy would, by the type's own
processor.

The rows are asyncpg's ``Record``: read by position, as every read of the store does
(the SQLite store's rows are plain tuples), with the same Python values SQLAlchemy gives
for the column types the tables use (text, integers, booleans, floats, timestamps).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

from ostinato.store.sql.by_statement import ByStatement

# What an entry holds before its statement's second use, and for one never compiled.
_SEEN, _NEVER = "seen", "never"
# Result types whose values asyncpg gives as SQLAlchemy would (it processes none of them).
_AS_THEY_COME = frozenset({sa.String, sa.Integer, sa.Boolean, sa.DateTime, sa.types.NullType})


@dataclass(frozen=True, slots=True)
class RawSQL:
    """A statement's text for asyncpg, the names of its ``$n`` parameters in order, and
    the values bound when it was built (a ``LIMIT``'s, a literal's)."""

    text: str
    names: tuple[str, ...]
    defaults: dict[str, Any]
    floats: tuple[int, ...] = ()  # columns typed Float: a NUMERIC value comes as a Decimal
    # the bind types' own conversions, by parameter position (SQLAlchemy's processors)
    converts: tuple[tuple[int, Callable[[Any], Any]], ...] = ()

    def args(self, params: dict[str, Any]) -> list[Any]:
        values = self.defaults | params if self.defaults else params
        found = [values[name] for name in self.names]
        for index, convert in self.converts:
            found[index] = convert(found[index])
        return found

    def rows(self, records: list[Any]) -> list[Any]:
        """The rows as SQLAlchemy would give them: a Float column's value a ``float``."""
        if not self.floats or not records:
            return records
        return [_floated(record, self.floats) for record in records]


def _floated(record: Any, floats: tuple[int, ...]) -> tuple[Any, ...]:
    row = list(record)
    for index in floats:
        if isinstance(row[index], Decimal):
            row[index] = float(row[index])
    return tuple(row)


def compile_raw(stmt: sa.Executable, dialect: sa.Dialect) -> RawSQL | None:
    """``stmt`` for asyncpg, or None when its text alone would not run it the way
    SQLAlchemy would (an expanding list, a result type that converts values)."""
    compiled: Any = stmt.compile(dialect=dialect)  # type: ignore[attr-defined]
    if any(bind.expanding or bind.literal_execute for bind in compiled.binds.values()):
        return None
    floats = []
    for index, column in enumerate(compiled._result_columns):
        kind = column.type._type_affinity
        if kind is sa.Float:
            floats.append(index)
        elif kind not in _AS_THEY_COME:
            return None
    names = tuple(compiled.positiontup or ())
    defaults = {k: v for k, v in compiled.params.items() if v is not None}
    processors = compiled._bind_processors
    converts = tuple((i, processors[name]) for i, name in enumerate(names) if name in processors)
    return RawSQL(str(compiled), names, defaults, tuple(floats), converts)


class RawStatements(ByStatement["RawSQL | str"]):
    """Each long-lived statement's ``RawSQL``, compiled at its second use (kept by the
    object itself: ``by_statement``)."""

    __slots__ = ("_dialect",)

    def __init__(self, dialect: sa.Dialect) -> None:
        super().__init__()
        self._dialect = dialect

    def get(self, stmt: sa.Executable) -> RawSQL | None:
        """The statement's ``RawSQL``; None for its first use and for one that is never
        compiled (both go SQLAlchemy's way)."""
        found = self.find(stmt)
        if found is None:
            self.keep(stmt, _SEEN)
            return None
        if found is _SEEN:
            found = compile_raw(stmt, self._dialect) or _NEVER
            self.keep(stmt, found)
        return found if isinstance(found, RawSQL) else None
