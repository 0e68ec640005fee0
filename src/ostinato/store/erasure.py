"""Deleting a conversation, or everything of an owner: every row of it, in one write.

``DeleteConversation`` removes the conversation and everything stored for it: its rows
(messages, with their search entries), turns (with their timelines), tool calls,
approvals, its own grants, queued inputs, compaction summaries, the facts and tool
switches of its own scope (``conversation:<id>``), its schedules, idempotency records,
hold, agent pins and protocol records. Facts the owner's memory learned in it stay the
owner's (their link to it is cleared), as do forged tools made in it.

``CONVERSATION_ROWS`` names, for the SQL stores, every table with a ``conversation_id``
column and what a deletion does to its rows (``delete`` or ``unlink``); a test fails
when a table with such a column is added without being named here. The files of the
conversation's workdir are the runtime's to remove (``Runtime.delete_conversation``).

``EraseOwner`` removes everything of an owner: each of their conversations as
``DeleteConversation`` does (their own facts learned in it go too), then every row of
the tables ``OWNER_ROWS`` names (keys, limits, grants, forged tools, MCP servers and
their credentials, schedules, jobs, spending, idempotency and protocol records) and of
their own scope (memory, tool switches). A test fails when a table with an ``owner``
column is added without being named in ``OWNER_ROWS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

Action: TypeAlias = Literal["delete", "unlink"]

CONVERSATION_ROWS: dict[str, Action] = {
    "messages": "delete",
    "message_search": "delete",
    "turns": "delete",
    "tool_calls": "delete",
    "tool_results": "delete",
    "approvals": "delete",
    "grants": "delete",
    "queued_inputs": "delete",
    "summaries": "delete",
    "schedules": "delete",
    "request_keys": "delete",
    "conversation_holds": "delete",
    "conversation_agents": "delete",
    "protocol_records": "delete",
    "memories": "unlink",  # a fact of the owner's learned in it stays theirs
    "forged_tools": "unlink",  # a tool made in it stays its owner's
}
"""Tables with a ``conversation_id`` column, and what deleting the conversation does."""

SCOPED_ROWS = ("memories", "memory_relations", "memory_uses", "tool_switches")
"""Tables whose ``scope`` may be the conversation's own (``conversation:<id>``)."""


@dataclass(frozen=True, slots=True)
class DeleteConversation:
    """Delete conversation ``conversation_id`` and everything stored for it; ``NotFound``
    if there is none. Returns None."""

    conversation_id: str


def conversation_scope(conversation_id: str) -> str:
    """The memory and tool-switch scope of a conversation of its own."""
    return f"conversation:{conversation_id}"


OWNER_ROWS: tuple[str, ...] = (
    "api_keys",
    "limit_slots",
    "limit_events",
    "grants",
    "forged_tools",
    "mcp_servers",
    "schedules",
    "protocol_records",
    "request_keys",
    "job_runs",
    "job_states",
    "spend_days",
    "spend_holds",
    "usage_days",
    "message_search",
)
"""Tables with an ``owner`` column (besides ``conversations``): erasing an owner deletes
their rows."""


@dataclass(frozen=True, slots=True)
class EraseOwner:
    """Delete everything stored of ``owner``: their conversations (as
    ``DeleteConversation``), the facts learned in them, and every row of ``OWNER_ROWS``
    and of their scope. Returns the ids of the conversations deleted (their workdirs are
    the caller's to remove). Erasing an owner with nothing stored does nothing."""

    owner: str
