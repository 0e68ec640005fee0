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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Literal, TypeAlias

from ostinato.messages import JSON, Message, ToolUseBlock
from ostinato.tools.base import Risk, Tool

Remember: TypeAlias = Literal["none", "exact", "family"]
# The "tool" of an approval that asks whether a turn may go past a soft spend limit
# (``ostinato.spend``): no tool call; its arguments are the card, its family the limit
# and period a grant then covers.
SPEND = "spend"


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


DEFAULT_ASK_FOR: frozenset[Risk] = frozenset({"write", "exec", "network"})


@dataclass(frozen=True, slots=True)
class ApprovalPolicy:
    """Which calls need a person's consent, and how long to wait for it.

    A call needs consent, checked in this order:

    1. when its tool's risk is in ``ask_for`` (by default ``write``, ``exec`` and
       ``network``: anything that changes things, runs code or sends a request out);
    2. when its tool writes long-term memory (``remember``, ``forget``) and the turn has
       taken in content from outside the conversation (a result of an ``untrusted``
       tool: a fetched page, a file, an MCP or OpenAPI result, a sub-agent's answer),
       unless ``memory_after_outside`` is off: text from elsewhere must not plant
       standing instructions without a person knowing.

    Otherwise the call runs without asking.
    """

    ask_for: frozenset[Risk] = DEFAULT_ASK_FOR
    timeout: float = 300.0
    memory_after_outside: bool = True

    def needs_consent(self, tool: Tool, *, outside: bool = False) -> bool:
        """``outside``: the turn has taken in content from outside the conversation."""
        if tool.risk in self.ask_for:
            return True
        return tool.writes_memory and outside and self.memory_after_outside


def brings_outside_content(tool: Tool | None) -> bool:
    """Whether a tool's results carry content from outside the conversation. A tool no
    longer mounted (say, an MCP server that is down) is taken to have."""
    return tool is None or tool.untrusted


OUTSIDE = "outside"  # a row's metadata flag: its text came from outside the conversation
_HANDED_ON = ("outside", "schedule")  # metadata.trigger of a trigger's, a prompt's hand-off


def from_outside(message: Message) -> bool:
    """Whether a row's text came from outside the conversation, not from the person, the
    operator's prompt or the model of this conversation: a trigger's text, a scheduled
    prompt's result handed on from its background run (which may have read anything)."""
    meta = message.metadata
    return meta.get(OUTSIDE) is True or meta.get("trigger") in _HANDED_ON


def outside_content(history: Sequence[Message], tools: Callable[[str], Tool | None]) -> bool:
    """Whether a history (the rows a turn's model sees) holds content from outside: a
    row that came from outside (``from_outside``) or a call to a tool that brings outside
    content (``brings_outside_content``); ``tools`` looks a tool up by name. It reads
    every row as a turn begins: the two checks are written out here, in one loop."""
    for message in history:
        meta = message.metadata
        if meta.get(OUTSIDE) is True or meta.get("trigger") in _HANDED_ON:
            return True
        if message.role == "assistant":
            for block in message.blocks:
                if type(block) is ToolUseBlock and (
                    (tool := tools(block.name)) is None or tool.untrusted
                ):
                    return True
    return False


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
