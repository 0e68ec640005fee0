"""SQLAlchemy statements compiled once to SQLite text, for the raw ``sqlite3`` driver.

SQLite statements run straight on ``sqlite3`` connections (no SQLAlchemy execution
layer per call): the text is compiled once from the Core construct, so a call is one
``cursor.execute``. Reads compile with named parameters (``compile_sqlite``); the
writer's statements, run a dozen times a step, with positional ones
(``compile_positional``), their values taken from the same named parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

from ostinato.store.sql.by_statement import ByStatement

_DIALECT = sqlite.dialect(paramstyle="named")
_POSITIONAL = sqlite.dialect(paramstyle="qmark")


@dataclass(frozen=True, slots=True)
class CompiledSQL:
    """SQL text with ``:name`` parameters, plus values SQLAlchemy bound at build time."""

    text: str
    defaults: dict[str, Any]


def compile_sqlite(stmt: sa.Executable) -> CompiledSQL:
    compiled = stmt.compile(dialect=_DIALECT)  # type: ignore[attr-defined]
    defaults = {k: v for k, v in compiled.params.items() if v is not None}
    return CompiledSQL(str(compiled), defaults)


class PositionalSQL(NamedTuple):
    """SQL text with ``?`` parameters, and how to take their values, in order, from the
    named parameters a caller gives (``values(params)``). ``sqlite3`` binds a named
    parameter by asking SQLite its name, making a ``str`` of it and looking it up in the
    dict, several times the cost of taking a tuple; a step's writes bind dozens."""

    text: str
    values: Callable[[dict[str, Any]], tuple[Any, ...]]


def compile_positional(stmt: sa.Executable) -> PositionalSQL:
    """``stmt`` as ``PositionalSQL`` (a statement that binds values at build time, or
    expands a list, is refused: its text alone would not run it)."""
    compiled = stmt.compile(dialect=_POSITIONAL)  # type: ignore[attr-defined]
    if any(v is not None for v in compiled.params.values()):
        raise ValueError(f"{compiled} binds values at build time")
    if any(bind.expanding for bind in compiled.binds.values()):
        raise ValueError(f"{compiled} expands a list")
    names: tuple[str, ...] = tuple(compiled.positiontup or ())
    if len(names) > 1:
        values: Callable[[dict[str, Any]], tuple[Any, ...]] = itemgetter(*names)
    elif names:
        only = names[0]
        values = lambda params: (params[only],)  # noqa: E731
    else:
        values = lambda params: ()  # noqa: E731
    return PositionalSQL(str(compiled), values)


class CompiledCache(ByStatement[CompiledSQL]):
    """Each statement object's ``CompiledSQL``, compiled on first use (kept by the object
    itself: ``by_statement``)."""

    __slots__ = ()

    def get(self, stmt: sa.Executable) -> CompiledSQL:
        compiled = self.find(stmt)
        if compiled is None:
            compiled = compile_sqlite(stmt)
            self.keep(stmt, compiled)
        return compiled
