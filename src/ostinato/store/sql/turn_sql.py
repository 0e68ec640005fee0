"""The statements that change a turn's row once it exists: its holder taken over
(``ClaimTurn``), its end (stop reason, metrics, timeline) and the amendment of its
metrics and timeline by the work done for it after it ended (``SetTurnMetrics``); and
the one change a stored message may see, its metadata (``SetMessageMetadata``: folded
into a summary, left out of the model's window)."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import sqlalchemy as sa

from ostinato.store.sql.tables import messages, turns

TurnWriteName: TypeAlias = Literal[
    "claim_turn", "finish_turn", "set_turn_metrics", "set_message_metadata"
]

_COLUMNS: dict[TurnWriteName, tuple[str, ...]] = {
    "finish_turn": ("status", "stop_reason", "finished_at", "metrics", "error", "timeline"),
    "set_turn_metrics": ("metrics", "timeline"),
}


def turn_statements() -> dict[Any, sa.Executable]:
    """Each an update of the turn ``b_id``, typed bind parameters named after columns."""
    where = turns.c.id == sa.bindparam("b_id", type_=turns.c.id.type)
    made: dict[Any, sa.Executable] = {
        name: _update(where, columns) for name, columns in _COLUMNS.items()
    }
    made["claim_turn"] = (  # a compare-and-set on the holder (``ClaimTurn``)
        sa.update(turns)
        .where(where, turns.c.holder.is_not_distinct_from(_holder("b_holder")))
        .values(holder=_holder("holder"))
    )
    made["set_message_metadata"] = (
        sa.update(messages)
        .where(
            messages.c.conversation_id
            == sa.bindparam("b_conversation_id", type_=messages.c.conversation_id.type),
            messages.c.seq == sa.bindparam("b_seq", type_=messages.c.seq.type),
        )
        .values(metadata=sa.bindparam("metadata", type_=messages.c.metadata.type))
    )
    return made


def _holder(name: str) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=turns.c.holder.type)


def _update(where: sa.ColumnElement[bool], columns: tuple[str, ...]) -> sa.Update:
    values: dict[str, Any] = {c: sa.bindparam(c, type_=turns.c[c].type) for c in columns}
    return sa.update(turns).where(where).values(values)
