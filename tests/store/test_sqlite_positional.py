"""SQLite's writer runs its statements with positional parameters
(``sqlite_sql.compile_positional``): the values are taken from the named parameters the
ops give, in the text's order, a name used twice given twice; a statement whose text
alone would not run it is refused when the writer is made."""

from __future__ import annotations

import sqlite3

import pytest
import sqlalchemy as sa

from ostinato.store.sql.sqlite_sql import compile_positional
from ostinato.store.sql.statements import write_statements

T = sa.table("t", sa.column("a"), sa.column("b"), sa.column("c"))


def run(stmt: sa.Executable, params: dict[str, object]) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (a, b, c)")
    conn.execute("INSERT INTO t VALUES (1, 2, 3)")
    text, values = compile_positional(stmt)
    conn.execute(text, values(params))
    return conn.execute("SELECT a, b, c FROM t ORDER BY rowid").fetchall()


def test_values_are_taken_in_the_texts_order_and_a_name_used_twice_twice() -> None:
    a = sa.bindparam("a")
    stmt = sa.update(T).values(b=a, c=sa.bindparam("c")).where(T.c.a == a)
    assert run(stmt, {"c": 30, "a": 1, "unused": 0}) == [(1, 1, 30)]


def test_one_parameter_and_none() -> None:
    assert run(sa.delete(T).where(T.c.a == sa.bindparam("a")), {"a": 1}) == []
    assert run(sa.delete(T), {}) == []


def test_a_statement_that_binds_a_value_at_build_time_is_refused() -> None:
    with pytest.raises(ValueError, match="binds values at build time"):
        compile_positional(sa.update(T).values(b=5))


def test_a_statement_that_expands_a_list_is_refused() -> None:
    stmt = sa.delete(T).where(T.c.a.in_(sa.bindparam("ids", expanding=True)))
    with pytest.raises(ValueError, match="expands a list"):
        compile_positional(stmt)


def test_every_write_statement_compiles() -> None:
    for name, stmt in write_statements("sqlite").items():
        text, _ = compile_positional(stmt)
        assert text.startswith(("INSERT", "UPDATE", "DELETE", "WITH", "SELECT")), name
