"""The in-memory store's write table covers every write op (it replaced a match whose
``assert_never`` made mypy check that)."""

from __future__ import annotations

from typing import get_args

from ostinato.store.base import WriteOp
from ostinato.store.memory_writes import WRITES


def test_every_write_op_has_exactly_one_write_function() -> None:
    assert set(WRITES) == set(get_args(WriteOp))
