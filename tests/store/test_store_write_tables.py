"""Both stores' write tables cover every write op (each replaced a match whose
``assert_never`` made mypy check that)."""

from __future__ import annotations

from typing import get_args

from ostinato.store.base import WriteOp
from ostinato.store.memory_writes import WRITES
from ostinato.store.sql.ops import OPS


def test_every_write_op_has_exactly_one_write_function() -> None:
    assert set(WRITES) == set(get_args(WriteOp))


def test_every_write_op_has_exactly_one_sql_function() -> None:
    assert set(OPS) == set(get_args(WriteOp))
