"""The table and the statement behind one result per tool call (``store.answered``),
for both engines.

``insert_tool_result`` records that a call has its result, in the write that appends
the row holding it. It does nothing on a clash with the primary key (the call already
has a result), so the op sees no row changed and refuses the write; the transaction is
never aborted by the clash. On PostgreSQL a second writer whose first is still in flight
waits for it to commit, then finds the key taken.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ostinato.store.sql.meta import ID, metadata

# One row per tool call that has its result (0019), declared in the store's one
# ``MetaData`` and re-exported by ``tables``: its primary key is what makes a second
# result impossible. A call is its conversation, the turn whose row made it ('' for a
# row written outside a turn) and its tool_use id; ``message_id`` is the row answering it.
tool_results = sa.Table(
    "tool_results",
    metadata,
    sa.Column(
        "conversation_id",
        ID,
        sa.ForeignKey("conversations.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("turn_id", ID, primary_key=True),
    sa.Column("tool_use_id", sa.String(), primary_key=True),
    sa.Column("message_id", ID, nullable=False),
)

AnswerWriteName: TypeAlias = Literal["insert_tool_result"]
_COLUMNS = ("conversation_id", "turn_id", "tool_use_id", "message_id")


def answer_statements(dialect: str) -> dict[Any, sa.Executable]:
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    values = {c: sa.bindparam(c, type_=tool_results.c[c].type) for c in _COLUMNS}
    return {
        "insert_tool_result": insert(tool_results)
        .values(values)
        .on_conflict_do_nothing(index_elements=["conversation_id", "turn_id", "tool_use_id"])
    }
