"""The SQL schema: one ``MetaData`` holding every table the store writes.

Alembic migrations (``0001``: the first four tables; ``0002``: approvals, grants,
queued inputs; ``0006``: turn timelines; ``0009``: leases, and the holder of each turn
and queued input; ``0010``: idempotency keys; ``0011``: schedules; ``0020``: trees)
are written against these definitions, and both engines (SQLite and PostgreSQL) compile
their statements from them. JSON values (message blocks, metadata, metrics, timelines,
tool input, approval arguments) are kept as JSON *text*, serialised by the store itself, so the two
engines hold byte-identical values and no driver-specific JSON codec is involved; a
queued input keeps its message as the messages table does.
Timestamps are ``DateTime(timezone=True)``: ``timestamptz`` on PostgreSQL, UTC text
(``YYYY-MM-DD HH:MM:SS.ffffff``) on SQLite; the store reads both back as aware UTC.
"""

from __future__ import annotations

import sqlalchemy as sa

from ostinato.store.sql.answer_sql import tool_results as tool_results
from ostinato.store.sql.meta import ID as _ID
from ostinato.store.sql.meta import RUN_STARTS as _RUN_STARTS
from ostinato.store.sql.meta import TIME as _TIME
from ostinato.store.sql.meta import metadata as metadata
from ostinato.store.sql.search_tables import message_search as message_search
from ostinato.store.sql.spend_tables import spend_days as spend_days
from ostinato.store.sql.spend_tables import spend_holds as spend_holds
from ostinato.store.sql.spend_tables import usage_days as usage_days
from ostinato.store.sql.version_tables import agent_versions as agent_versions
from ostinato.store.sql.version_tables import conversation_agents as conversation_agents

conversations = sa.Table(
    "conversations",
    metadata,
    sa.Column("id", _ID, primary_key=True),
    sa.Column("owner", sa.String(), nullable=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("persona", sa.String(), nullable=True),
    sa.Column("title", sa.Text, nullable=True),
    sa.Column("metadata", sa.Text, nullable=False, server_default="{}"),
    sa.Column("created_at", _TIME, nullable=False),
    sa.Column("updated_at", _TIME, nullable=False),
    # 0018: kept at the top of the person's list; out of the default list since when
    sa.Column("pinned", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("archived_at", _TIME, nullable=True),
    # its current branch (``store.tree.Branch``; 0020): NULL while it never branched
    sa.Column("branch_ranges", sa.Text, nullable=True),
    sa.Column("branch_since", sa.Integer, nullable=True),
    sa.Column("branch_tip", sa.Integer, nullable=True),
    sa.Index(None, "owner", "id"),
)

turns = sa.Table(
    "turns",
    metadata,
    sa.Column("id", _ID, primary_key=True),
    sa.Column(
        "conversation_id",
        _ID,
        sa.ForeignKey("conversations.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("run_id", _ID, nullable=False),
    sa.Column("kind", sa.String(), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("stop_reason", sa.String(32), nullable=True),
    sa.Column("started_at", _TIME, nullable=False),
    sa.Column("finished_at", _TIME, nullable=True),
    sa.Column("metrics", sa.Text, nullable=False, server_default="{}"),
    sa.Column("error", sa.Text, nullable=True),
    # the steps with their model and tool calls, as JSON text; NULL until it ends (0006)
    sa.Column("timeline", sa.Text, nullable=True),
    # The lease (``servers.id``) of the process that runs the turn; NULL: none (0009).
    sa.Column("holder", _ID, nullable=True),
    sa.Index(None, "conversation_id", "started_at"),
    sa.Index(None, "status"),
)

messages = sa.Table(
    "messages",
    metadata,
    sa.Column("id", _ID, primary_key=True),
    sa.Column(
        "conversation_id",
        _ID,
        sa.ForeignKey("conversations.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("turn_id", _ID, nullable=True),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("blocks", sa.Text, nullable=False),
    sa.Column("hidden", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("metadata", sa.Text, nullable=False, server_default="{}"),
    sa.Column("created_at", _TIME, nullable=False),
    sa.Column("parent_seq", sa.Integer, nullable=True),  # NULL: seq - 1 (a tree's; 0020)
    # The unique constraint's index is also the index every read of a history uses.
    sa.UniqueConstraint("conversation_id", "seq"),
    sa.Index("ix_messages_run_starts", "conversation_id", "seq", "parent_seq", **_RUN_STARTS),
)

# A tool call is keyed by its turn and its tool_use id (models reuse tool_use ids across
# conversations). No foreign keys: a tool call is recorded as it happens, and the
# reference semantics (MemoryStore) do not require its conversation or turn to exist.
tool_calls = sa.Table(
    "tool_calls",
    metadata,
    sa.Column("turn_id", _ID, primary_key=True),
    sa.Column("id", sa.String(), primary_key=True),
    sa.Column("conversation_id", _ID, nullable=False),
    sa.Column("name", sa.String(), nullable=False),
    sa.Column("input", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("result", sa.Text, nullable=True),
    sa.Column("is_error", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("started_at", _TIME, nullable=False),
    sa.Column("finished_at", _TIME, nullable=True),
    sa.Column("duration_s", sa.Float, nullable=True),
    sa.Index(None, "conversation_id", "turn_id"),
)

# --- people in the loop (revision 0002) --------------------------------------------

# Every approval asked for, pending or decided: the audit trail of consent.
approvals = sa.Table(
    "approvals",
    metadata,
    sa.Column("id", _ID, primary_key=True),
    sa.Column(
        "conversation_id",
        _ID,
        sa.ForeignKey("conversations.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("turn_id", _ID, nullable=False),
    sa.Column("tool_use_id", sa.String(), nullable=False),
    sa.Column("tool", sa.String(), nullable=False),
    sa.Column("arguments", sa.Text, nullable=False),
    sa.Column("arguments_hash", sa.String(64), nullable=False),
    sa.Column("risk", sa.String(16), nullable=False),
    sa.Column("family", sa.String(), nullable=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("ending", sa.String(16), nullable=True),
    sa.Column("requested_at", _TIME, nullable=False),
    sa.Column("decided_at", _TIME, nullable=True),
    sa.Column("decided_by", sa.String(), nullable=True),
    sa.Column("remember", sa.String(16), nullable=False, server_default="none"),
    sa.Index(None, "status"),
    sa.Index(None, "conversation_id"),
)

# Remembered approvals. A grant belongs to an owner or to a conversation; no foreign
# key, as in the reference semantics (an owner's grant outlives any one conversation).
grants = sa.Table(
    "grants",
    metadata,
    sa.Column("id", _ID, primary_key=True),
    sa.Column("owner", sa.String(), nullable=True),
    sa.Column("conversation_id", _ID, nullable=True),
    sa.Column("tool", sa.String(), nullable=False),
    sa.Column("scope", sa.String(16), nullable=False),
    sa.Column("key", sa.String(), nullable=False),
    sa.Column("created_at", _TIME, nullable=False),
    sa.Column("expires_at", _TIME, nullable=True),
    sa.Column("revoked_at", _TIME, nullable=True),
    sa.Column("approval_id", _ID, nullable=True),
    sa.Column("metadata", sa.Text, nullable=False, server_default="{}"),
    sa.Index(None, "owner", "tool"),
    sa.Index(None, "conversation_id", "tool"),
)

# Messages that arrived while their conversation was busy. ``position`` is the arrival
# order across the store: an identity column (a sequence) on PostgreSQL; on SQLite the
# insert takes MAX(position) + 1 under the database's one write lock.
queued_inputs = sa.Table(
    "queued_inputs",
    metadata,
    sa.Column("id", _ID, primary_key=True),
    sa.Column("position", sa.BigInteger, sa.Identity(), nullable=False),
    sa.Column(
        "conversation_id",
        _ID,
        sa.ForeignKey("conversations.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("blocks", sa.Text, nullable=False),
    sa.Column("hidden", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("metadata", sa.Text, nullable=False, server_default="{}"),
    sa.Column("client_message_id", sa.String(), nullable=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("created_at", _TIME, nullable=False),
    sa.Column("holder", _ID, nullable=True),  # the lease of the process that will run it
    sa.UniqueConstraint("position"),
    sa.Index(None, "status", "position"),
    sa.Index(None, "conversation_id", "status"),
)

# --- history window and long-term memory (revision 0003) -----------------------------

# Compaction watermarks: one row per summary a conversation was given. The summary itself
# is a hidden ``system`` row of ``messages`` (seq ``message_seq``), summarising every row
# up to ``through_seq``; the latest (highest ``message_seq``) is the current watermark,
# found by the primary key.
summaries = sa.Table(
    "summaries",
    metadata,
    sa.Column(
        "conversation_id",
        _ID,
        sa.ForeignKey("conversations.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("message_seq", sa.Integer, primary_key=True),
    sa.Column("message_id", _ID, nullable=False),
    sa.Column("through_seq", sa.Integer, nullable=False),
    sa.Column("created_at", _TIME, nullable=False),
)

# Long-term memory: facts per scope (an owner, or ``conversation:<id>``), bitemporal.
# A fact is never deleted or edited: closing one (forget, supersede) sets ``valid_to``
# (and ``superseded_by``). ``num`` is an integer key for the full-text index: on SQLite
# it is the rowid (an FTS5 table, ``memories_fts``, indexes the current facts, kept in
# step by triggers); PostgreSQL has a stored generated ``search_vector`` column instead,
# under a GIN index of the current facts. Both are made by the migration, outside this
# metadata (``select(memories)`` never reads ``search_vector``).
memories = sa.Table(
    "memories",
    metadata,
    sa.Column(
        "num",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        sa.Identity(),
        primary_key=True,
    ),
    sa.Column("id", _ID, nullable=False),
    sa.Column("scope", sa.String(), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("subject", sa.String(), nullable=True),
    sa.Column("valid_from", _TIME, nullable=False),
    sa.Column("valid_to", _TIME, nullable=True),
    sa.Column("recorded_at", _TIME, nullable=False),
    sa.Column("supersedes", _ID, nullable=True),
    sa.Column("superseded_by", _ID, nullable=True),
    sa.Column("conversation_id", _ID, nullable=True),
    sa.Column("turn_id", _ID, nullable=True),
    sa.UniqueConstraint("id"),
    sa.Index(None, "scope", "valid_to", "recorded_at"),
    sa.Index(None, "scope", "subject"),
)

# Relations between facts of one scope (``store.relations``; revision 0007): ``source``
# is ``relation`` of ``target``. Never deleted, like the facts they link.
memory_relations = sa.Table(
    "memory_relations",
    metadata,
    sa.Column("source", _ID, sa.ForeignKey("memories.id"), primary_key=True),
    sa.Column("relation", sa.String(), primary_key=True),
    sa.Column("target", _ID, sa.ForeignKey("memories.id"), primary_key=True),
    sa.Column("scope", sa.String(), nullable=False),
    sa.Column("created_at", _TIME, nullable=False),
    sa.Index(None, "scope", "target"),
)

# Forged tools (``store.forged``; revision 0008): every version of each owner's tools,
# the parameters' schema as JSON text; the newest version of a removed tool has
# ``removed_at``.
forged_tools = sa.Table(
    "forged_tools",
    metadata,
    sa.Column("owner", sa.String(), primary_key=True),
    sa.Column("name", sa.String(), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("parameters", sa.Text, nullable=False),
    sa.Column("code", sa.Text, nullable=False),
    sa.Column("created_at", _TIME, nullable=False),
    sa.Column("removed_at", _TIME, nullable=True),
    sa.Column("conversation_id", _ID, nullable=True),
)

# Per-person MCP servers (``store.mcp_servers``; revision 0013): the credentials only
# encrypted (``secret``).
mcp_servers = sa.Table(
    "mcp_servers",
    metadata,
    sa.Column("owner", sa.String(), primary_key=True),
    sa.Column("name", sa.String(), primary_key=True),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("secret", sa.Text, nullable=True),
    sa.Column("risk", sa.String(), nullable=True),
    sa.Column("created_at", _TIME, nullable=False),
)


# Tools a user (or a conversation without an owner) switched off or back on (0004).
tool_switches = sa.Table(
    "tool_switches",
    metadata,
    sa.Column("scope", sa.String(), primary_key=True),
    sa.Column("tool", sa.String(), primary_key=True),
    sa.Column("enabled", sa.Boolean(), nullable=False),
    sa.Column("updated_at", _TIME, nullable=False),
)


# API keys (hash only) and the counters behind per-owner limits (0005).
api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", _ID, primary_key=True),
    sa.Column("owner", sa.String(), nullable=False),
    sa.Column("name", sa.String(), nullable=False),
    sa.Column("secret_hash", sa.String(64), nullable=False),
    sa.Column("created_at", _TIME, nullable=False),
    sa.Column("expires_at", _TIME, nullable=True),
    sa.Column("revoked_at", _TIME, nullable=True),
    sa.Index(None, "owner"),
)

limit_slots = sa.Table(
    "limit_slots",
    metadata,
    sa.Column("id", _ID, primary_key=True),
    sa.Column("owner", sa.String(), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("expires_at", _TIME, nullable=False),
    sa.Index(None, "owner", "kind", "expires_at"),
)

limit_events = sa.Table(
    "limit_events",
    metadata,
    sa.Column("id", _ID, primary_key=True),
    sa.Column("owner", sa.String(), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("at", _TIME, nullable=False),
    sa.Index(None, "owner", "kind", "at"),
)


# Leases (0009): one row per server process that runs turns, renewed while it lives. A
# turn or queued input whose ``holder`` names no live row here belongs to nobody, and
# recovery may take it over (``ostinato.leases``).
servers = sa.Table(
    "servers",
    metadata,
    sa.Column("id", _ID, primary_key=True),
    sa.Column("host", sa.String(), nullable=False),  # for people: the host name
    sa.Column("machine", sa.String(), nullable=False),  # host, boot and pid namespace
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("pid_start", sa.String(), nullable=True),  # when that pid started (Linux)
    sa.Column("started_at", _TIME, nullable=False),
    sa.Column("renewed_at", _TIME, nullable=False),
    sa.Column("expires_at", _TIME, nullable=False),
)


# Idempotency keys (0010): one row per (owner, key) a client sent, until it expires; what
# the first request with that key did (``store.idempotency``).
request_keys = sa.Table(
    "request_keys",
    metadata,
    sa.Column("owner", sa.String(), primary_key=True),
    sa.Column("key", sa.String(), primary_key=True),
    sa.Column("fingerprint", sa.String(64), nullable=False),
    sa.Column("created_at", _TIME, nullable=False),
    sa.Column("expires_at", _TIME, nullable=False),
    sa.Column("conversation_id", _ID, nullable=True),
    sa.Column("turn_id", _ID, nullable=True),
    sa.Column("after_seq", sa.Integer, nullable=True),
    sa.Column("queued_id", _ID, nullable=True),
    sa.Column("queued_position", sa.BigInteger, nullable=True),
    sa.Column("status_code", sa.Integer, nullable=True),
    sa.Column("response", sa.Text(), nullable=True),
    sa.Index(None, "expires_at"),
)


# Schedules (0011, ``store.schedules``): prompts and reminders that fire at a time. The
# poller reads ``wake_at`` only (``ix_schedules_wake_at``): the next slot while due, the
# lease's end while claimed or ran, NULL once delivered.
schedules = sa.Table(
    "schedules",
    metadata,
    sa.Column("id", _ID, primary_key=True),
    sa.Column("owner", sa.String(), nullable=False),
    sa.Column("conversation_id", _ID, nullable=False),
    sa.Column("mode", sa.String(), nullable=False),  # prompt | reminder
    sa.Column("text", sa.Text(), nullable=False),
    sa.Column("kind", sa.String(), nullable=False),  # once | every | daily | cron
    sa.Column("spec", sa.String(), nullable=False),
    sa.Column("zone", sa.String(), nullable=False),
    sa.Column("created_at", _TIME, nullable=False),
    sa.Column("next_fire", _TIME, nullable=True),
    sa.Column("state", sa.String(), nullable=False),  # due | claimed | ran | delivered
    sa.Column("holder", sa.String(), nullable=True),
    sa.Column("lease_until", _TIME, nullable=True),
    sa.Column("fired", sa.Integer, nullable=False),
    sa.Column("last_fired_at", _TIME, nullable=True),
    sa.Column("late_seconds", sa.Float, nullable=True),
    sa.Column("wake_at", _TIME, nullable=True),
    # 0014: the firing's work (a prompt's stage one): its run_id, its answer once ran,
    # and how many attempts at it began
    sa.Column("run_id", sa.String(), nullable=True),
    sa.Column("result", sa.Text(), nullable=True),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Index(None, "wake_at"),
    sa.Index(None, "owner", "state"),
)


# What the protocols other clients speak name and a conversation does not hold
# (``store.protocol_records``; 0016): a response, a run, a store item, by kind and id.
protocol_records = sa.Table(
    "protocol_records",
    metadata,
    sa.Column("kind", sa.String(), primary_key=True),
    sa.Column("id", sa.String(), primary_key=True),
    sa.Column("owner", sa.String(), nullable=False),
    sa.Column("conversation_id", _ID, nullable=True),
    sa.Column("data", sa.Text(), nullable=False),
    sa.Column("created_at", _TIME, nullable=False),
    sa.Column("updated_at", _TIME, nullable=False),
    sa.Index(None, "kind", "owner", "created_at"),
    sa.Index(None, "kind", "conversation_id", "created_at"),
)


# Full-text search structures the migration makes outside ``metadata`` (SQLite's FTS5
# tables and their shadow tables, PostgreSQL's document columns and their indexes):
# schema comparisons (``alembic revision --autogenerate``, the migration tests) leave
# them out.
FULL_TEXT_OBJECTS = (
    "memories_fts",
    "ix_memories_fts",
    "search_vector",
    "message_fts",
    "ix_message_search_fts",
)


def include_object(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    """Alembic's ``include_object`` hook: everything but ``FULL_TEXT_OBJECTS``."""
    return not (name is not None and name.startswith(FULL_TEXT_OBJECTS))


# Conversation holds (0012): which server's worker runs a conversation's turns now, so
# that with several servers one turn runs per conversation (``ostinato.holds``). ``token``
# is the worker's: a release deletes only its own hold.
conversation_holds = sa.Table(
    "conversation_holds",
    metadata,
    sa.Column("conversation_id", _ID, primary_key=True),
    sa.Column("holder", sa.String(), nullable=False),  # a lease id (``servers.id``)
    sa.Column("token", sa.String(), nullable=False),
)


# Idle-gated background jobs (0014, ``store.jobs``): each job's state per owner (claimed
# with a lease, released by the write that commits a run), the runs that did something,
# and when recall last returned each fact (the stale-facts job reads it).
job_states = sa.Table(
    "job_states",
    metadata,
    sa.Column("owner", sa.String(), primary_key=True),
    sa.Column("job", sa.String(), primary_key=True),
    sa.Column("holder", sa.String(), nullable=True),
    sa.Column("lease_until", _TIME, nullable=True),
    sa.Column("active_at", _TIME, nullable=True),
    sa.Column("last_run_at", _TIME, nullable=True),
    sa.Column("day", sa.String(), nullable=True),
    sa.Column("calls", sa.Integer, nullable=False),
    sa.Column("not_before", _TIME, nullable=True),
    sa.Column("notes", sa.Text, nullable=False),
)
job_runs = sa.Table(
    "job_runs",
    metadata,
    sa.Column("id", _ID, primary_key=True),
    sa.Column("owner", sa.String(), nullable=False),
    sa.Column("job", sa.String(), nullable=False),
    sa.Column("started_at", _TIME, nullable=False),
    sa.Column("finished_at", _TIME, nullable=False),
    sa.Column("status", sa.String(), nullable=False),
    sa.Column("changes", sa.Text, nullable=False),
    sa.Column("model_calls", sa.Integer, nullable=False),
    sa.Column("tokens", sa.Integer, nullable=False),
    sa.Column("cost_usd", sa.Float, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Index(None, "owner", "started_at"),
)
memory_uses = sa.Table(
    "memory_uses",
    metadata,
    sa.Column("scope", sa.String(), primary_key=True),
    sa.Column("memory_id", _ID, primary_key=True),
    sa.Column("used_at", _TIME, nullable=False),
)
