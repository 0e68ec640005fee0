"""Every SQL statement the store runs, built once from the tables as SQLAlchemy Core.

Writes are named (``WriteName``) so an engine can compile each one once and run it by
name: PostgreSQL executes the constructs through SQLAlchemy, SQLite executes their
compiled text straight on its ``sqlite3`` connection. Bind parameters are typed, so
asyncpg gets explicit casts, and every value is a named parameter (no literals bound
at build time), so the compiled text needs nothing but the caller's parameters.

Two statements carry the store's guarantees:

- ``insert_message`` allocates ``seq`` inside the statement
  (``INSERT ... SELECT COALESCE(MAX(seq), 0) + 1 ... WHERE conversation_id = :c``) and
  does nothing on a ``(conversation_id, seq)`` clash, so a writer that lost a race sees
  no row returned and retries; the transaction is never aborted by the clash.
- ``insert_turn`` selects its conversation id from ``conversations``, so an unknown
  conversation inserts no row (``NotFound``) instead of raising a foreign-key error.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any, Literal, TypeAlias

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ostinato.store.sql.tables import conversations, messages, tool_calls, turns

WriteName: TypeAlias = Literal[
    "insert_conversation",
    "set_state",
    "touch_conversation",
    "insert_turn",
    "finish_turn",
    "insert_message",
    "insert_tool_call",
    "finish_tool_call",
]


def _bind(table: sa.Table, *names: str) -> dict[str, sa.BindParameter[Any]]:
    """Typed bind parameters named after ``table``'s columns."""
    return {name: sa.bindparam(name, type_=table.c[name].type) for name in names}


def _insert(dialect: str, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
    return postgresql.insert(table) if dialect == "postgresql" else sqlite.insert(table)


@cache
def write_statements(dialect: str) -> Mapping[WriteName, sa.Executable]:
    """The write statements for ``dialect`` (``"sqlite"`` or ``"postgresql"``)."""
    conv_cols = [c.name for c in conversations.columns]
    turn_cols = [c.name for c in turns.columns]
    call_cols = [c.name for c in tool_calls.columns]
    msg_cols = [c.name for c in messages.columns if c.name != "seq"]

    turn_values = _bind(turns, *turn_cols)
    turn_values["conversation_id"] = conversations.c.id  # type: ignore[assignment]
    insert_turn = sa.insert(turns).from_select(
        turn_cols,
        sa.select(*(turn_values[name] for name in turn_cols)).where(
            conversations.c.id == sa.bindparam("conversation_id", type_=conversations.c.id.type)
        ),
    )

    next_seq = sa.func.coalesce(
        sa.func.max(messages.c.seq), sa.literal_column("0")
    ) + sa.literal_column("1")
    msg_values = _bind(messages, *msg_cols)
    insert_message = (
        _insert(dialect, messages)
        .from_select(
            [*msg_cols, "seq"],
            sa.select(*(msg_values[name] for name in msg_cols), next_seq).where(
                messages.c.conversation_id == msg_values["conversation_id"]
            ),
        )
        .on_conflict_do_nothing(index_elements=["conversation_id", "seq"])
        .returning(messages.c.seq)
    )

    return {
        "insert_conversation": _insert(dialect, conversations)
        .values(_bind(conversations, *conv_cols))
        .on_conflict_do_nothing(index_elements=["id"]),
        "set_state": sa.update(conversations)
        .where(conversations.c.id == sa.bindparam("b_id", type_=conversations.c.id.type))
        .values(_bind(conversations, "state", "updated_at")),
        "touch_conversation": sa.update(conversations)
        .where(conversations.c.id == sa.bindparam("b_id", type_=conversations.c.id.type))
        .values(_bind(conversations, "updated_at")),
        "insert_turn": insert_turn,
        "finish_turn": sa.update(turns)
        .where(turns.c.id == sa.bindparam("b_id", type_=turns.c.id.type))
        .values(_bind(turns, "status", "stop_reason", "finished_at", "metrics", "error")),
        "insert_message": insert_message,
        "insert_tool_call": _insert(dialect, tool_calls)
        .values(_bind(tool_calls, *call_cols))
        .on_conflict_do_nothing(index_elements=["turn_id", "id"]),
        "finish_tool_call": sa.update(tool_calls)
        .where(
            tool_calls.c.turn_id == sa.bindparam("b_turn_id", type_=tool_calls.c.turn_id.type),
            tool_calls.c.id == sa.bindparam("b_id", type_=tool_calls.c.id.type),
        )
        .values(_bind(tool_calls, "status", "result", "is_error", "finished_at", "duration_s")),
    }


# --- reads ----------------------------------------------------------------------------
# Each read is a select of whole rows in table column order (what ``rows`` decodes).
# Optional filters are separate cached statements rather than ``:x IS NULL OR ...``
# tricks, so each variant compiles once and keeps using its index.


def _param(column: sa.Column[Any], name: str) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=column.type)


@cache
def get_conversation() -> sa.Select[Any]:
    return sa.select(conversations).where(conversations.c.id == _param(conversations.c.id, "id"))


@cache
def list_conversations(by_owner: bool, paged: bool) -> sa.Select[Any]:
    stmt = sa.select(conversations)
    if by_owner:
        stmt = stmt.where(conversations.c.owner == _param(conversations.c.owner, "owner"))
    if paged:
        stmt = stmt.where(conversations.c.id < _param(conversations.c.id, "before"))
    return stmt.order_by(conversations.c.id.desc()).limit(sa.bindparam("limit", type_=sa.Integer))


@cache
def list_messages(include_hidden: bool, limited: bool) -> sa.Select[Any]:
    stmt = sa.select(messages).where(
        messages.c.conversation_id == _param(messages.c.conversation_id, "conversation_id"),
        messages.c.seq > _param(messages.c.seq, "after_seq"),
    )
    if not include_hidden:
        stmt = stmt.where(messages.c.hidden == _param(messages.c.hidden, "hidden"))
    stmt = stmt.order_by(messages.c.seq)
    if limited:
        stmt = stmt.limit(sa.bindparam("limit", type_=sa.Integer))
    return stmt


@cache
def get_turn() -> sa.Select[Any]:
    return sa.select(turns).where(turns.c.id == _param(turns.c.id, "id"))


@cache
def list_turns() -> sa.Select[Any]:
    return (
        sa.select(turns)
        .where(turns.c.conversation_id == _param(turns.c.conversation_id, "conversation_id"))
        .order_by(turns.c.started_at, turns.c.id)
    )


@cache
def running_turns() -> sa.Select[Any]:
    return (
        sa.select(turns)
        .where(turns.c.status == _param(turns.c.status, "status"))
        .order_by(turns.c.started_at, turns.c.id)
    )


@cache
def list_tool_calls(by_turn: bool) -> sa.Select[Any]:
    stmt = sa.select(tool_calls).where(
        tool_calls.c.conversation_id == _param(tool_calls.c.conversation_id, "conversation_id")
    )
    if by_turn:
        stmt = stmt.where(tool_calls.c.turn_id == _param(tool_calls.c.turn_id, "turn_id"))
    return stmt.order_by(tool_calls.c.started_at, tool_calls.c.id)
