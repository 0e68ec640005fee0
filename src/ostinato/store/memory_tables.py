"""What the in-memory store holds: one dict per table (``MemoryTables``), apart from the
writes that change them (``memory_writes`` and the ``memory_*`` modules of each kind of
op), so that those modules and the write dispatch depend on it and not on each other."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import datetime

from ostinato.approvals import Approval, Grant
from ostinato.messages import Message
from ostinato.store.accounts import ApiKey
from ostinato.store.base import (
    Conversation,
    MemoryFact,
    QueuedInput,
    ToolCallRecord,
    Turn,
)
from ostinato.store.forged import ForgedTool
from ostinato.store.jobs import JobRun, JobState
from ostinato.store.leases import ServerLease
from ostinato.store.mcp_servers import McpServerRecord
from ostinato.store.protocol_records import ProtocolRecord
from ostinato.store.relations import MemoryRelation
from ostinato.store.schedules import Schedule
from ostinato.store.spend import Hold, UsageRow
from ostinato.versions import AgentVersion


@dataclass(slots=True)
class MemoryTables:
    """Everything the in-memory store holds, one dict per table."""

    _conversations: dict[str, Conversation] = field(default_factory=dict)
    _messages: dict[str, list[Message]] = field(default_factory=dict)
    _turns: dict[str, Turn] = field(default_factory=dict)
    _tool_calls: dict[tuple[str, str], ToolCallRecord] = field(default_factory=dict)
    # the calls that have their result: (conversation, turn of the call, tool_use id)
    _answered: set[tuple[str, str, str]] = field(default_factory=set)
    # updated_at of a state change, kept apart from the conversation (``_set_state``);
    # an append's is its row's time (``MemoryStore._current``)
    _updated: dict[str, datetime] = field(default_factory=dict)
    _approvals: dict[str, Approval] = field(default_factory=dict)
    _grants: dict[str, Grant] = field(default_factory=dict)
    _queue: dict[str, QueuedInput] = field(default_factory=dict)
    _positions: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    # the summaries of each conversation, oldest first: a row, the seq it summarises through
    _summaries: dict[str, list[tuple[Message, int]]] = field(default_factory=dict)
    _switches: dict[tuple[str, str], bool] = field(default_factory=dict)  # (scope, tool)
    _memories: dict[str, MemoryFact] = field(default_factory=dict)  # current and closed
    _keys: dict[str, ApiKey] = field(default_factory=dict)  # store.accounts: API keys,
    _slots: dict[str, tuple[str, str, datetime]] = field(default_factory=dict)  # limit slots,
    _events: list[tuple[str, str, datetime]] = field(default_factory=list)  # limit events
    # store.relations: (source, relation, target) -> the relation
    _relations: dict[tuple[str, str, str], MemoryRelation] = field(default_factory=dict)
    _forged: dict[tuple[str, str], list[ForgedTool]] = field(default_factory=dict)  # versions
    _mcp_servers: dict[tuple[str, str], McpServerRecord] = field(default_factory=dict)
    _leases: dict[str, ServerLease] = field(default_factory=dict)  # live servers (``leases``)
    _schedules: dict[str, Schedule] = field(default_factory=dict)  # ``store.schedules``
    # ``store.protocol_records``: by (kind, id)
    _protocol_records: dict[tuple[str, str], ProtocolRecord] = field(default_factory=dict)
    # ``store.jobs``: each job's state per (owner, job), its runs, and facts' last use
    _job_states: dict[tuple[str, str], JobState] = field(default_factory=dict)
    _job_runs: dict[str, JobRun] = field(default_factory=dict)
    _fact_uses: dict[tuple[str, str], datetime] = field(default_factory=dict)
    # ``store.spend``: budget accounts per day, holds of calls under way, usage per owner
    _spend_days: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)
    _spend_holds: dict[str, Hold] = field(default_factory=dict)
    _usage_days: dict[tuple[str, str, str, str], UsageRow] = field(default_factory=dict)
    # ``store.versions``: every agent's versions, and each conversation's pins
    _agent_versions: dict[str, list[AgentVersion]] = field(default_factory=dict)
    _pins: dict[str, dict[str, int | None]] = field(default_factory=dict)
