"""The seam between the write ops (``ops``) and an engine: an ``Executor`` runs named
statements inside the caller's transaction; ``WriteTime`` is one write's time; stored
JSON has one encoding (``dump_json``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from ostinato.messages import JSON
from ostinato.store.sql.rows import Row
from ostinato.store.sql.statements import WriteName


class Executor(Protocol):
    """Runs named statements (``WriteName``) inside the caller's open transaction."""

    def execute(self, name: WriteName, params: dict[str, Any]) -> int:
        """Run a statement; return how many rows it changed."""
        ...

    def returning(self, name: WriteName, params: dict[str, Any]) -> Any:
        """Run an ``INSERT ... RETURNING x``; return ``x`` of the row, or None if none."""
        ...

    def row(self, name: WriteName, params: dict[str, Any]) -> Row | None:
        """Run a statement that yields rows (``SELECT``, ``... RETURNING``); the first."""
        ...

    def time(self, value: datetime) -> Any:
        """A timestamp as this engine binds it (naive values are taken as UTC)."""
        ...

    def read_time(self, value: Any) -> datetime:
        """A stored timestamp back as an aware UTC datetime."""
        ...


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dump_json(value: JSON | list[JSON]) -> str:
    """The one JSON encoding of stored values (compact, UTF-8 kept as is)."""
    return _ENCODER.encode(value) if value else "{}" if isinstance(value, dict) else "[]"


@dataclass(frozen=True, slots=True)
class WriteTime:
    """The time of one ``write()`` call, as a datetime and as the engine binds it."""

    value: datetime
    bound: Any
