"""A write planned before it runs: its statements, from the ops' own functions.

``plan`` runs a ``write()`` call's ops through the one op path (``ops.apply_ops``)
against a ``Recorder``, an ``Executor`` that runs nothing: it records each statement
with its parameters and answers as if it had succeeded (a changed row for ``execute``,
a value to come, ``Pending``, for ``returning``). An engine can then send the whole
write as one statement and check every assumption there (``pg_writer``); a write whose
assumption does not hold there is redone the ordinary way, statement by statement,
which finds what is wrong (an unknown row, a ``seq`` taken meanwhile) and says so as
it always does.

A write's parts run in one snapshot, so a later append to a conversation the write
appended to already cannot see that row: the ``Recorder`` records it as
``insert_next_message``, which takes the seq that many past the newest it sees and the
row before it as its parent (a turn's start with a seed call appends two rows).

Only ops whose success is decided by their statements' row counts are planned
(``PLANNED``): the ops of a step (with its call's charge, when it has no hold to read),
of a turn's start and end, and a conversation's creation. An op that needs a
statement's rows (``Executor.row``) or feeds one result into another statement is
not planned; neither is anything else, which goes the ordinary way.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ostinato.store.base import (
    AppendMessage,
    CreateApproval,
    CreateConversation,
    Enqueue,
    FinishToolCall,
    FinishTurn,
    SetConversationState,
    SetMessageMetadata,
    SetTurnMetrics,
    StartToolCall,
    StartTurn,
    TakeQueued,
    WriteOp,
)
from ostinato.store.spend import SettleSpend, TabSpend
from ostinato.store.sql.executor import Pending
from ostinato.store.sql.ops import apply_ops
from ostinato.store.sql.rows import Row, time_from_postgres, utc_time
from ostinato.store.sql.statements import WriteName

PLANNED: frozenset[type] = frozenset(
    {
        CreateConversation,  # a new chat: its row and its title's index entry
        AppendMessage,
        StartToolCall,
        FinishToolCall,
        StartTurn,
        FinishTurn,
        SetTurnMetrics,
        SetConversationState,
        SetMessageMetadata,
        TakeQueued,
        Enqueue,
        CreateApproval,
        SettleSpend,  # a counted call's charge (one with a hold reads it: not planned)
        TabSpend,  # a call on its turn's tab (closing one reads it: not planned)
    }
)


class NotPlanned(Exception):
    """The ops cannot be planned: they go the ordinary way."""


@dataclass(frozen=True, slots=True)
class Planned:
    """One statement of a plan: its name, its parameters, and whether its
    ``RETURNING`` value is wanted (``returning``) or only that it changed a row."""

    name: WriteName
    params: dict[str, Any]
    returning: bool


@dataclass(frozen=True, slots=True)
class Plan:
    """A write's statements in order, and its results with ``Pending`` values in them."""

    statements: tuple[Planned, ...]
    results: list[Any]

    @property
    def shape(self) -> tuple[WriteName, ...]:
        """The statements' names: plans of one shape run as one statement text."""
        return tuple(s.name for s in self.statements)

    @property
    def conversation(self) -> str:
        """The conversation the write's first statement that names one is in ("" if
        none): a group of writes locks rows in this order (``pg_writer``)."""
        for planned in self.statements:
            params = planned.params
            found = params.get("conversation_id") or params.get("b_conversation_id")
            if found is None and planned.name == "set_state":
                found = params.get("b_id")
            if found is not None:
                return str(found)
        return ""

    def resolve(self, values: Row) -> list[Any]:
        """The results with each ``Pending`` replaced by its value (``values[i]`` is
        statement ``i``'s; only the ``returning`` ones are read)."""
        return [_filled(result, values) for result in self.results]


class Recorder:
    """An ``Executor`` that records statements and assumes they succeed (PostgreSQL's
    bound values: the plans are for ``pg_writer``)."""

    serialise_appends = False  # the write is one statement, redone whole on a clash
    time = staticmethod(utc_time)
    read_time = staticmethod(time_from_postgres)

    def __init__(self) -> None:
        self.statements: list[Planned] = []
        self._appended: dict[Any, int] = {}  # conversation -> its appends so far

    def returning(self, name: WriteName, params: dict[str, Any]) -> Any:
        if name == "insert_message":  # a later one of the write: ``insert_next_message``
            cid = params["conversation_id"]
            before = self._appended.get(cid, 0)
            self._appended[cid] = before + 1
            if before:
                name, params = "insert_next_message", {**params, "b_after": before}
        return Pending(self._record(name, params, returning=True))

    def execute(self, name: WriteName, params: dict[str, Any]) -> int:
        self._record(name, params, returning=False)
        return 1

    def row(self, name: WriteName, params: dict[str, Any]) -> Row | None:
        raise NotPlanned(name)

    def rows(self, name: WriteName, params: dict[str, Any]) -> list[Row]:
        raise NotPlanned(name)

    def _record(self, name: WriteName, params: dict[str, Any], returning: bool) -> int:
        if any(type(value) is Pending for value in params.values()):
            raise NotPlanned(name)  # one statement's result feeds another
        self.statements.append(Planned(name, params, returning))
        return len(self.statements) - 1


def plan(ops: tuple[WriteOp, ...]) -> Plan | None:
    """The plan of ``ops``, or None if they go the ordinary way."""
    for op in ops:
        if type(op) not in PLANNED:
            return None
    recorder = Recorder()
    try:
        results = apply_ops(recorder, ops)
    except Exception:  # NotPlanned, or an op that refuses: the ordinary way says why
        return None
    return Plan(tuple(recorder.statements), results)


def _filled(result: Any, values: Row) -> Any:
    names = _FIELDS.get(type(result))
    if names is None:
        names = _FIELDS[type(result)] = _fields_of(result)
    changes = {
        name: value.value(values[value.index])
        for name in names
        if type(value := getattr(result, name)) is Pending
    }
    return dataclasses.replace(result, **changes) if changes else result


_FIELDS: dict[type, tuple[str, ...]] = {}  # a result's type -> its fields' names (``_filled``)


def _fields_of(result: Any) -> tuple[str, ...]:
    """The names of ``result``'s fields (none for what is not a dataclass instance): read
    once per type, not for every write (``dataclasses.fields`` builds a tuple each time)."""
    if not dataclasses.is_dataclass(result) or isinstance(result, type):
        return ()
    return tuple(field.name for field in dataclasses.fields(result))
