"""Every SQL statement the store runs, built once from the tables as SQLAlchemy Core.

Writes are named (``WriteName``) so an engine can compile each one once and run it by
name: PostgreSQL executes the constructs through SQLAlchemy, SQLite executes their
compiled text straight on its ``sqlite3`` connection. Bind parameters are typed, so
asyncpg gets explicit casts, and every value is a named parameter (no literals bound
at build time), so the compiled text needs nothing but the caller's parameters.

Three statements carry the store's guarantees:

- ``insert_message`` allocates ``seq`` inside the statement
  (``INSERT ... SELECT COALESCE(MAX(seq), 0) + 1 ... WHERE conversation_id = :c``) and
  does nothing on a ``(conversation_id, seq)`` clash, so a writer that lost a race sees
  no row returned and retries; the transaction is never aborted by the clash.
- ``insert_tool_result`` (``answer_sql``) keeps one result per tool call: a clash
  with its key inserts nothing, and the append is refused (``AlreadyAnswered``).
- ``insert_turn`` selects its conversation id from ``conversations``, so an unknown
  conversation inserts no row (``NotFound``) instead of raising a foreign-key error.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any, Literal, TypeAlias

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ostinato.store.sql.account_sql import AccountWriteName, account_statements
from ostinato.store.sql.answer_sql import AnswerWriteName, answer_statements
from ostinato.store.sql.conversation_sql import conversation_columns
from ostinato.store.sql.erasure_sql import erasure_statements
from ostinato.store.sql.forged_sql import ForgedWriteName, forged_statements
from ostinato.store.sql.job_sql import JobWriteName, job_statements
from ostinato.store.sql.mcp_sql import McpWriteName, mcp_statements
from ostinato.store.sql.relation_sql import RelationWriteName, relation_statements
from ostinato.store.sql.search_sql import SearchWriteName, search_statements
from ostinato.store.sql.spend_sql import SpendWriteName, spend_write_statements
from ostinato.store.sql.tables import (
    approvals,
    conversations,
    grants,
    memories,
    messages,
    queued_inputs,
    summaries,
    tool_calls,
    tool_switches,
    turns,
)
from ostinato.store.sql.tree_sql import TreeWriteName, tree_statements
from ostinato.store.sql.turn_sql import TurnWriteName, turn_statements
from ostinato.store.sql.version_sql import VersionWriteName, version_statements

WriteName: TypeAlias = (
    AccountWriteName
    | AnswerWriteName
    | TurnWriteName
    | TreeWriteName
    | RelationWriteName
    | ForgedWriteName
    | McpWriteName
    | JobWriteName
    | SearchWriteName
    | VersionWriteName
    | SpendWriteName
    | Literal[
        "insert_conversation",
        "set_state",
        "lock_conversation",
        "insert_turn",
        "insert_message",
        "insert_next_message",
        "insert_tool_call",
        "finish_tool_call",
        "insert_approval",
        "decide_approval",
        "insert_grant",
        "revoke_grant",
        "insert_queued",
        "take_queued",
        "edit_queued",
        "drop_queued",
        "find_queued_in",
        "insert_summary",
        "lock_memory_scope",
        "count_memories",
        "insert_memory",
        "close_memory",
        "set_tool_switch",
        # Lookups, run only after a statement changed nothing, to say why.
        "find_conversation",
        "find_approval",
        "find_queued",
        "find_memory",
    ]
)

# The first key of the advisory locks that serialise memory writes to one scope on
# PostgreSQL (the second is the scope's hash). Two-key locks never meet the migration's
# one-key lock.
MEMORY_LOCK_CLASS = 0x6D656D  # "mem"


def _bind(table: sa.Table, *names: str) -> dict[str, sa.BindParameter[Any]]:
    """Typed bind parameters named after ``table``'s columns."""
    return {name: sa.bindparam(name, type_=table.c[name].type) for name in names}


def _insert(dialect: str, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
    return postgresql.insert(table) if dialect == "postgresql" else sqlite.insert(table)


def _where_id(table: sa.Table, column: str = "id", name: str = "b_id") -> sa.ColumnElement[bool]:
    return table.c[column] == sa.bindparam(name, type_=table.c[column].type)


def _insert_for_conversation(
    dialect: str,
    table: sa.Table,
    columns: list[str],
    extra: Mapping[str, Any] | None = None,
    conflict: list[str] | None = None,
) -> postgresql.Insert | sqlite.Insert:
    """``INSERT ... SELECT`` of one row that names a conversation, selected from
    ``conversations``: an unknown conversation inserts nothing, as does a taken id (or
    whatever else ``conflict`` names)."""
    values: dict[str, Any] = _bind(table, *columns)
    values["conversation_id"] = conversations.c.id
    values.update(extra or {})
    select = sa.select(*values.values()).where(
        conversations.c.id == sa.bindparam("conversation_id", type_=conversations.c.id.type)
    )
    return (
        _insert(dialect, table)
        .from_select(list(values), select)
        .on_conflict_do_nothing(index_elements=conflict or ["id"])
    )


@cache
def write_statements(dialect: str) -> Mapping[WriteName, sa.Executable]:
    """The write statements for ``dialect`` (``"sqlite"`` or ``"postgresql"``)."""
    return {
        **_history_statements(dialect),
        **answer_statements(dialect),
        **_people_statements(dialect),
        **_memory_statements(dialect),
        **account_statements(dialect),
        **relation_statements(dialect),
        **forged_statements(dialect),
        **mcp_statements(dialect),
        **job_statements(dialect),
        **search_statements(dialect),
        **spend_write_statements(dialect),
        **version_statements(dialect),
        **erasure_statements(),
        **tree_statements(),
    }


def _parent() -> sa.ColumnElement[Any]:
    """A new row's ``parent_seq``: NULL (the row before it) unless the conversation's
    branch was moved to ``branch_tip`` and no row was written since (``store.tree``).
    The conversation's columns decide it; the newest seq is looked up only then."""
    newest = messages.alias("newest")
    top = (
        sa.select(sa.func.max(newest.c.seq))
        .where(newest.c.conversation_id == conversations.c.id)
        .scalar_subquery()
    )
    return sa.case(
        (conversations.c.branch_tip.is_(None), sa.null()),
        (top > conversations.c.branch_since, sa.null()),
        else_=conversations.c.branch_tip,
    )


def _position() -> sa.ColumnElement[Any]:
    """What an insert of a message returns: its seq and its parent in one integer
    (``seq << 32 | parent``, ``ops.split_position``), so a write planned as one
    statement (``speculate``) gets both from its one value."""
    parent = sa.func.coalesce(messages.c.parent_seq, messages.c.seq - sa.literal_column("1"))
    return (messages.c.seq * sa.literal_column("4294967296") + parent).label("position")


def _history_statements(dialect: str) -> dict[WriteName, sa.Executable]:
    """Conversations, turns, messages and tool calls."""
    conv_cols = [c.name for c in conversations.columns]
    turn_cols = [c.name for c in turns.columns]
    call_cols = [c.name for c in tool_calls.columns]
    msg_cols = [c.name for c in messages.columns if c.name not in ("seq", "parent_seq")]
    earlier = messages.alias("earlier")
    next_seq = (
        sa.select(
            sa.func.coalesce(sa.func.max(earlier.c.seq), sa.literal_column("0"))
            + sa.literal_column("1")
        )
        .where(earlier.c.conversation_id == conversations.c.id)
        .scalar_subquery()
    )
    insert_message = _insert_for_conversation(
        dialect,
        messages,
        msg_cols,
        {"seq": next_seq, "parent_seq": _parent()},
        conflict=["conversation_id", "seq"],
    ).returning(_position())
    # A later append of one planned write (``speculate``): the statement's parts share
    # one snapshot, so it cannot see the rows appended before it in that write; it takes
    # ``b_after`` seqs past the newest it sees, and the row before it as its parent.
    after = sa.bindparam("b_after", type_=sa.Integer())
    insert_next = _insert_for_conversation(
        dialect,
        messages,
        msg_cols,
        {"seq": next_seq + after, "parent_seq": sa.null()},
        conflict=["conversation_id", "seq"],
    ).returning(_position())
    lock = sa.select(conversations.c.id).where(_where_id(conversations))
    return {
        "insert_conversation": _insert(dialect, conversations)
        .values(_bind(conversations, *conv_cols))
        .on_conflict_do_nothing(index_elements=["id"]),
        "set_state": sa.update(conversations)
        .where(_where_id(conversations))
        .values(_bind(conversations, "state", "updated_at")),
        # Held until commit: appenders to one conversation take turns (PostgreSQL).
        "lock_conversation": lock.with_for_update() if dialect == "postgresql" else lock,
        "insert_turn": _insert_for_conversation(dialect, turns, turn_cols),
        **turn_statements(),
        "insert_message": insert_message,
        "insert_next_message": insert_next,
        "insert_tool_call": _insert(dialect, tool_calls)
        .values(_bind(tool_calls, *call_cols))
        .on_conflict_do_nothing(index_elements=["turn_id", "id"]),
        "finish_tool_call": sa.update(tool_calls)
        .where(_where_id(tool_calls, "turn_id", "b_turn_id"), _where_id(tool_calls))
        .values(_bind(tool_calls, "status", "result", "is_error", "finished_at", "duration_s")),
        "find_conversation": sa.select(conversations.c.id).where(_where_id(conversations)),
    }


def _people_statements(dialect: str) -> dict[WriteName, sa.Executable]:
    """Approvals, grants and queued inputs."""
    grant_cols = [c.name for c in grants.columns]
    queued_cols = [c.name for c in queued_inputs.columns if c.name != "position"]
    # PostgreSQL draws the position from the column's identity sequence. SQLite has no
    # sequence for a column that is not the rowid: it takes the next position in the
    # insert itself, which is safe because every SQLite write holds the write lock.
    position: dict[str, Any] = {}
    if dialect != "postgresql":
        position["position"] = sa.select(
            sa.func.coalesce(sa.func.max(queued_inputs.c.position), sa.literal_column("0"))
            + sa.literal_column("1")
        ).scalar_subquery()
    insert_queued = _insert_for_conversation(
        dialect, queued_inputs, queued_cols, position
    ).returning(queued_inputs.c.position)
    return {
        "insert_approval": _insert_for_conversation(
            dialect, approvals, [c.name for c in approvals.columns]
        ),
        # Only a pending approval can be decided; the decided row comes back whole.
        "decide_approval": sa.update(approvals)
        .where(_where_id(approvals), _where_id(approvals, "status", "b_status"))
        .values(_bind(approvals, "status", "ending", "decided_at", "decided_by", "remember"))
        .returning(*approvals.columns),
        "insert_grant": _insert(dialect, grants)
        .values(_bind(grants, *grant_cols))
        .on_conflict_do_nothing(index_elements=["id"]),
        # Revoking twice keeps the first time; the row still counts as matched.
        "revoke_grant": sa.update(grants)
        .where(_where_id(grants))
        .values(
            revoked_at=sa.func.coalesce(
                grants.c.revoked_at, sa.bindparam("b_revoked_at", type_=grants.c.revoked_at.type)
            )
        ),
        "insert_queued": insert_queued,
        "take_queued": sa.update(queued_inputs)
        .where(_where_id(queued_inputs), _where_id(queued_inputs, "status", "b_status"))
        .values(_bind(queued_inputs, "status")),
        "edit_queued": sa.update(queued_inputs)
        .where(*_queued_in_conversation())
        .values(_bind(queued_inputs, "blocks", "metadata")),
        "drop_queued": sa.update(queued_inputs)
        .where(*_queued_in_conversation())
        .values(_bind(queued_inputs, "status")),
        "find_queued_in": sa.select(queued_inputs.c.status).where(
            _where_id(queued_inputs),
            _where_id(queued_inputs, "conversation_id", "b_conversation_id"),
        ),
        "find_approval": sa.select(approvals.c.status, approvals.c.ending).where(
            _where_id(approvals)
        ),
        "find_queued": sa.select(queued_inputs.c.status).where(_where_id(queued_inputs)),
    }


def _queued_in_conversation() -> tuple[sa.ColumnElement[bool], ...]:
    """A queued input of one conversation, still queued."""
    return (
        _where_id(queued_inputs),
        _where_id(queued_inputs, "conversation_id", "b_conversation_id"),
        _where_id(queued_inputs, "status", "b_status"),
    )


def _memory_statements(dialect: str) -> dict[WriteName, sa.Executable]:
    """Summaries (the compaction watermark) and memory facts."""
    fact_cols = [c.name for c in memories.columns if c.name != "num"]
    scope = sa.bindparam("scope", type_=memories.c.scope.type)
    if dialect == "postgresql":
        # Serialises writers to one scope until commit, so a capacity check cannot race.
        lock: sa.Executable = sa.select(
            sa.func.pg_advisory_xact_lock(
                sa.literal_column(str(MEMORY_LOCK_CLASS)), sa.func.hashtext(scope)
            )
        )
    else:
        lock = sa.select(sa.literal_column("1"))  # SQLite's one writer serialises already
    return {
        "insert_summary": _insert(dialect, summaries).values(
            _bind(summaries, *(c.name for c in summaries.columns))
        ),
        "lock_memory_scope": lock,
        "count_memories": sa.select(sa.func.count())
        .select_from(memories)
        .where(memories.c.scope == scope, memories.c.valid_to.is_(None)),
        "insert_memory": _insert(dialect, memories).values(_bind(memories, *fact_cols)),
        # Only a current fact of the scope closes; the closed row comes back whole.
        "close_memory": sa.update(memories)
        .where(
            _where_id(memories),
            _where_id(memories, "scope", "b_scope"),
            memories.c.valid_to.is_(None),
        )
        .values(_bind(memories, "valid_to", "superseded_by"))
        .returning(*memories.columns),
        "find_memory": sa.select(memories).where(_where_id(memories)),
        "set_tool_switch": _insert(dialect, tool_switches)
        .values(_bind(tool_switches, "scope", "tool", "enabled", "updated_at"))
        .on_conflict_do_update(
            index_elements=["scope", "tool"],
            set_={
                "enabled": sa.bindparam("enabled", type_=sa.Boolean()),
                "updated_at": sa.bindparam("updated_at", type_=tool_switches.c.updated_at.type),
            },
        ),
    }


# --- reads ----------------------------------------------------------------------------
# Each read is a select of whole rows in table column order (what ``rows`` decodes).
# Optional filters are separate cached statements rather than ``:x IS NULL OR ...``
# tricks, so each variant compiles once and keeps using its index.


def _param(column: sa.Column[Any], name: str) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=column.type)


@cache
def get_conversation() -> sa.Select[Any]:
    return sa.select(*conversation_columns()).where(
        conversations.c.id == _param(conversations.c.id, "id")
    )


@cache
def list_conversations(by_owner: bool, paged: bool, archived: bool | None) -> sa.Select[Any]:
    stmt = sa.select(*conversation_columns())
    if by_owner:
        stmt = stmt.where(conversations.c.owner == _param(conversations.c.owner, "owner"))
    if paged:
        stmt = stmt.where(conversations.c.id < _param(conversations.c.id, "before"))
    if archived is not None:
        column = conversations.c.archived_at
        stmt = stmt.where(column.is_not(None) if archived else column.is_(None))
    return stmt.order_by(conversations.c.id.desc()).limit(sa.bindparam("limit", type_=sa.Integer))


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


@cache
def get_approval() -> sa.Select[Any]:
    return sa.select(approvals).where(approvals.c.id == _param(approvals.c.id, "id"))


@cache
def list_approvals(by_conversation: bool, pending_only: bool) -> sa.Select[Any]:
    stmt = sa.select(approvals)
    if by_conversation:
        stmt = stmt.where(
            approvals.c.conversation_id == _param(approvals.c.conversation_id, "conversation_id")
        )
    if pending_only:
        stmt = stmt.where(approvals.c.status == _param(approvals.c.status, "status"))
    return stmt.order_by(approvals.c.requested_at, approvals.c.id)


@cache
def get_grant() -> sa.Select[Any]:
    return sa.select(grants).where(grants.c.id == _param(grants.c.id, "id"))


@cache
def list_grants(by_owner: bool, by_conversation: bool, include_revoked: bool) -> sa.Select[Any]:
    """Grants of an owner, of a conversation, or of either (at least one is asked for)."""
    assert by_owner or by_conversation
    whose = []
    if by_owner:
        whose.append(grants.c.owner == _param(grants.c.owner, "owner"))
    if by_conversation:
        whose.append(
            grants.c.conversation_id == _param(grants.c.conversation_id, "conversation_id")
        )
    stmt = sa.select(grants).where(sa.or_(*whose))
    if not include_revoked:
        stmt = stmt.where(grants.c.revoked_at.is_(None))
    return stmt.order_by(grants.c.created_at, grants.c.id)


@cache
def list_queued(by_conversation: bool) -> sa.Select[Any]:
    stmt = sa.select(queued_inputs).where(
        queued_inputs.c.status == _param(queued_inputs.c.status, "status")
    )
    if by_conversation:
        stmt = stmt.where(
            queued_inputs.c.conversation_id
            == _param(queued_inputs.c.conversation_id, "conversation_id")
        )
    return stmt.order_by(queued_inputs.c.position)


# --- tool switches ----------------------------------------------------------------------


@cache
def switched_off_tools() -> sa.Select[Any]:
    return sa.select(tool_switches.c.tool).where(
        tool_switches.c.scope == _param(tool_switches.c.scope, "scope"),
        tool_switches.c.enabled.is_(False),
    )
