"""The export file, version 1: what ``ostinato export`` writes and ``ostinato import`` reads.

One JSON object::

    {"format": "ostinato-export", "version": 1, "exported_at": "...", "owner": "ann",
     "conversations": [{"id", "title", "persona", "metadata", "state", "pinned",
                        "archived_at", "created_at", "updated_at", "branch_tip",
                        "turns": [...], "tool_calls": [...], "approvals": [...],
                        "messages": [...]}],
     "memories": [{"id", "text", "subject", "valid_from", "recorded_at",
                   "conversation_id", "turn_id"}]}

``memories`` (the owner's current facts) is there only when the export was asked for
them; a file without the key imports as before, and stores no memory.

Every row of every branch is there: a message's ``parent_seq`` is the row it follows in
the conversation's tree (0 for a first row), ``branch_tip`` the last row of the branch the
conversation is on. Attachments are in their messages' ``image`` and ``file`` blocks, with
their content (base64). Ids are the exporting store's: an import gives the conversation,
its turns and its approvals new ones (a file imported twice makes two conversations), and
keeps everything else. docs/data.md describes each field.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ostinato.errors import InvalidRequest

FORMAT = "ostinato-export"
VERSION = 1


class ImportRefused(InvalidRequest):
    """A file that cannot be imported; the message names the place."""

    code = "import_refused"


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TurnRow(_Row):
    id: str = Field(min_length=1, max_length=64)
    run_id: str = Field(max_length=64)
    kind: str = Field(max_length=32)
    status: Literal["running", "finished"]
    stop_reason: str | None = None
    started_at: datetime
    finished_at: datetime | None = None
    metrics: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    timeline: dict[str, Any] | None = None


class ToolCallRow(_Row):
    id: str = Field(min_length=1, max_length=200)
    turn_id: str
    name: str = Field(max_length=200)
    input: dict[str, Any]
    status: str = Field(max_length=16)
    started_at: datetime
    finished_at: datetime | None = None
    duration_s: float | None = None
    result: str | None = None
    is_error: bool = False


class ApprovalRow(_Row):
    id: str
    turn_id: str
    tool_use_id: str = Field(max_length=200)
    tool: str = Field(max_length=200)
    arguments: dict[str, Any]
    arguments_hash: str = Field(max_length=128)
    risk: str = Field(max_length=32)
    family: str | None = None
    requested_at: datetime
    status: Literal["pending", "decided"] = "pending"
    ending: str | None = None
    decided_at: datetime | None = None
    decided_by: str | None = None
    remember: Literal["none", "exact", "family"] = "none"


class MessageRow(_Row):
    seq: int = Field(ge=1)
    parent_seq: int = Field(ge=0)
    role: Literal["user", "assistant", "tool", "system"]
    blocks: list[dict[str, Any]]
    hidden: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    turn_id: str | None = None
    created_at: datetime | None = None


class ConversationDoc(_Row):
    id: str
    title: str | None = None
    persona: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    state: Literal["idle", "running", "paused", "failed"] = "idle"
    pinned: bool = False
    archived_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    branch_tip: int = Field(default=0, ge=0)
    turns: list[TurnRow] = Field(default_factory=list)
    tool_calls: list[ToolCallRow] = Field(default_factory=list)
    approvals: list[ApprovalRow] = Field(default_factory=list)
    messages: list[MessageRow] = Field(default_factory=list)


class MemoryRow(_Row):
    """A current fact of the owner; ``conversation_id`` / ``turn_id``: where it was
    learned (kept on import when that conversation is in the file)."""

    id: str = Field(max_length=200)
    text: str
    subject: str | None = None
    valid_from: datetime
    recorded_at: datetime
    conversation_id: str | None = None
    turn_id: str | None = None


class ExportDocument(_Row):
    format: Literal["ostinato-export"]
    version: Literal[1]
    exported_at: datetime | None = None
    owner: str | None = None
    conversations: list[ConversationDoc]
    memories: list[MemoryRow] | None = None
