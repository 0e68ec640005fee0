"""Values kept per SQLAlchemy statement object, for the stores that compile a statement
once and run its text straight on their driver (``sqlite_sql.CompiledCache``,
``pg_reads.RawStatements``).

Found by ``id(stmt)`` for speed, so every entry also holds a weak reference to its
statement and is dropped when that statement is freed: a statement built for one call
and freed can leave its id to a new statement, which must never be run with the old
one's text. (It was: a cached ``list_approvals`` ran a freed statement's SQL, and SQLite
asked for its ``:owner`` parameter, a 500 found by the crash test.)
"""

from __future__ import annotations

import weakref
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class ByStatement(Generic[V]):
    """A value per live statement object."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref[Any], V]] = {}

    def find(self, stmt: Any) -> V | None:
        """What was kept for ``stmt`` (this very object), or None."""
        entry = self._entries.get(id(stmt))
        if entry is not None and entry[0]() is stmt:
            return entry[1]
        return None

    def keep(self, stmt: Any, value: V) -> None:
        """Keep ``value`` for ``stmt`` until the statement is freed (or replaced)."""
        key = id(stmt)
        entry = self._entries.get(key)
        if entry is not None and entry[0]() is stmt:
            self._entries[key] = (entry[0], value)
            return
        entries = self._entries

        def forget(ref: weakref.ref[Any]) -> None:
            found = entries.get(key)
            if found is not None and found[0] is ref:
                del entries[key]

        entries[key] = (weakref.ref(stmt, forget), value)

    def __len__(self) -> int:
        return len(self._entries)
