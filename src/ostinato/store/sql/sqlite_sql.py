"""SQLAlchemy statements compiled once to SQLite text, for the raw ``sqlite3`` driver.

SQLite statements run straight on ``sqlite3`` connections (no SQLAlchemy execution
layer per call): the text is compiled once from the Core construct, so a call is one
``cursor.execute``. Reads compile with named parameters (``compile_sqlite``); the
writer's statements, run a dozen times a step, with positional ones
(``compile_positional``), their values taken from the same named parameters.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

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


class CompiledCache:
    """Each statement object's ``CompiledSQL``, compiled on first use.

    Looked up by ``id(stmt)`` for speed, so every entry also holds a weak reference to
    its statement and is dropped when that statement is freed: a statement built for one
    call and freed can leave its id to a new statement, which must never be run with the
    old one's text. (It was: a cached ``list_approvals`` ran a freed statement's SQL, and
    SQLite asked for its ``:owner`` parameter, a 500 found by the crash test.)
    """

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref[Any], CompiledSQL]] = {}

    def get(self, stmt: sa.Executable) -> CompiledSQL:
        key = id(stmt)
        entry = self._entries.get(key)
        if entry is not None and entry[0]() is stmt:
            return entry[1]
        compiled = compile_sqlite(stmt)
        entries = self._entries

        def forget(ref: weakref.ref[Any]) -> None:
            found = entries.get(key)
            if found is not None and found[0] is ref:
                del entries[key]

        entries[key] = (weakref.ref(stmt, forget), compiled)
        return compiled

    def __len__(self) -> int:
        return len(self._entries)
