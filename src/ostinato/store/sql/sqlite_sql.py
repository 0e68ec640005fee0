"""SQLAlchemy statements compiled once to SQLite text, for the raw ``sqlite3`` driver.

SQLite statements run straight on ``sqlite3`` connections (no SQLAlchemy execution
layer per call): the text is compiled once from the Core construct with named
parameters, so a call is one ``cursor.execute(text, params)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

_DIALECT = sqlite.dialect(paramstyle="named")


@dataclass(frozen=True, slots=True)
class CompiledSQL:
    """SQL text with ``:name`` parameters, plus values SQLAlchemy bound at build time."""

    text: str
    defaults: dict[str, Any]


def compile_sqlite(stmt: sa.Executable) -> CompiledSQL:
    compiled = stmt.compile(dialect=_DIALECT)  # type: ignore[attr-defined]
    defaults = {k: v for k, v in compiled.params.items() if v is not None}
    return CompiledSQL(str(compiled), defaults)
