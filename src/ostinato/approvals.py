"""Approvals: a tool call whose risk needs consent asks a person first. Pure data and rules.

An approval ends in exactly one of five ways. Every sentence about an ending (what the
model is told, what the tool result says, who the audit row names as the approver) is
derived here from that one word, so the trail can never claim more than happened (the
idea follows Kotoba's approval gate):

- ``APPROVED``: a person allowed it (or a remembered grant did); the tool runs.
- ``DECLINED``: a person refused (or the turn was cancelled while it waited).
- ``UNANSWERED``: nobody answered before the deadline.
- ``UNREACHABLE``: no surface was watching the conversation, so nobody could be asked.
- ``DISMISSED``: the user sent a message instead of answering.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Literal, TypeAlias

from ostinato.messages import JSON
from ostinato.tools.base import Risk, Tool

Remember: TypeAlias = Literal["none", "exact", "family"]


class Ending(StrEnum):
    APPROVED = "APPROVED"
    DECLINED = "DECLINED"
    UNANSWERED = "UNANSWERED"
    UNREACHABLE = "UNREACHABLE"
    DISMISSED = "DISMISSED"


_TOLD: dict[Ending, str] = {
    Ending.APPROVED: "",
    Ending.DECLINED: "not run: the user declined this call",
    Ending.UNANSWERED: "not run: the user did not answer the approval request in time",
    Ending.UNREACHABLE: (
        "not run: this call needs the user's approval and no one was there to ask"
    ),
    Ending.DISMISSED: (
        "not run: the user sent a new message instead of answering the approval request"
    ),
}


def refusal(ending: Ending, tool: str) -> str:
    """The tool result the model sees when the call did not run."""
    assert ending is not Ending.APPROVED
    return f"{_TOLD[ending]} ({tool})"


def approver(ending: Ending, who: str | None) -> str:
    """Who the audit row names: a person only when a person decided."""
    if ending in (Ending.APPROVED, Ending.DECLINED) and who:
        return who
    if ending is Ending.DISMISSED:
        return "user (moved on)"
    return "nobody"


def arguments_hash(tool: str, arguments: JSON) -> str:
    """A stable hash of a call: the same tool with the same arguments hashes the same."""
    canonical = json.dumps([tool, arguments], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ApprovalPolicy:
    """Which risks need consent, and how long to wait for it."""

    ask_for: frozenset[Risk] = frozenset({"write", "exec"})
    timeout: float = 300.0

    def needs_consent(self, tool: Tool) -> bool:
        return tool.risk in self.ask_for


@dataclass(frozen=True, slots=True)
class Approval:
    id: str
    conversation_id: str
    turn_id: str
    tool_use_id: str
    tool: str
    arguments: JSON
    arguments_hash: str
    risk: str
    family: str | None
    requested_at: datetime
    status: Literal["pending", "decided"] = "pending"
    ending: Ending | None = None
    decided_at: datetime | None = None
    decided_by: str | None = None
    remember: Remember = "none"


@dataclass(frozen=True, slots=True)
class Grant:
    """A remembered approval: for one exact call, or for a tool's family of calls."""

    id: str
    owner: str | None  # None: the grant belongs to a conversation (``conversation_id``)
    conversation_id: str | None
    tool: str
    scope: Literal["exact", "family"]
    key: str  # the arguments hash, or the family
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    approval_id: str | None = None
    metadata: JSON = field(default_factory=dict)

    def covers(self, tool: str, args_hash: str, family: str | None, now: datetime) -> bool:
        if self.tool != tool or self.revoked_at is not None:
            return False
        if self.expires_at is not None and now >= self.expires_at:
            return False
        if self.scope == "exact":
            return self.key == args_hash
        return family is not None and self.key == family
