"""The store: rows with a per-conversation sequence, the source of truth.

Reads are plain async methods. Every write is a small op dataclass handed to ``Store.write``;
the ops of one call commit together or not at all, and it returns what each op produced.
Writing through one method keeps a single insert path for messages (where ``seq`` is
allocated) and lets an engine batch concurrent writers into one commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, TypeAlias

from ostinato.approvals import Approval, Ending, Grant, Remember
from ostinato.messages import JSON, Message
from ostinato.store.accounts import AccountOp, AccountReads
from ostinato.store.branches import HistoryWindow as HistoryWindow
from ostinato.store.branches import TreeOp, TreeReads
from ostinato.store.erasure import DeleteConversation, EraseOwner
from ostinato.store.forged import ForgedOp, ForgedReads
from ostinato.store.jobs import JobOp, JobReads
from ostinato.store.mcp_servers import McpServerOp, McpServerReads
from ostinato.store.memory_records import MEMORY_CAPACITY as MEMORY_CAPACITY
from ostinato.store.memory_records import MEMORY_SUBJECT_LIMIT as MEMORY_SUBJECT_LIMIT
from ostinato.store.memory_records import MEMORY_TEXT_LIMIT as MEMORY_TEXT_LIMIT
from ostinato.store.memory_records import ForgetFact as ForgetFact
from ostinato.store.memory_records import MemoryConflict as MemoryConflict
from ostinato.store.memory_records import MemoryFact as MemoryFact
from ostinato.store.memory_records import MemoryFull as MemoryFull
from ostinato.store.memory_records import MemoryHit as MemoryHit
from ostinato.store.memory_records import RememberFact as RememberFact
from ostinato.store.memory_records import check_fact_text as check_fact_text
from ostinato.store.memory_records import normalize_subject as normalize_subject
from ostinato.store.relations import RelationOp, RelationReads
from ostinato.store.search import SearchReads
from ostinato.store.spend import SpendOp
from ostinato.store.tree import WHOLE, Branch

ConversationState: TypeAlias = Literal["idle", "running", "paused", "failed"]
TurnStopReason: TypeAlias = Literal[
    "end_turn",
    "paused",
    "budget_exhausted",
    "spend_limit",
    "cancelled",
    "failed",
    "crashed",
    "interrupted",
]
# running: executing; waiting: a ui call waiting for a person; ok / error / timeout: how it
# ran; refused: consent was not given; dismissed: the user moved on from a card;
# interrupted: cancelled or cut by a crash; unknown: a non-idempotent call cut by a crash
# (it may or may not have taken effect); skipped: never run (cut off, repeated, budget).
ToolCallStatus: TypeAlias = Literal[
    "running",
    "waiting",
    "ok",
    "error",
    "timeout",
    "refused",
    "dismissed",
    "interrupted",
    "unknown",
    "skipped",
]

# The state a conversation is left in by each way a turn can end (DESIGN invariant 6).
STATE_AFTER: dict[str, ConversationState] = {
    "end_turn": "idle",
    "paused": "paused",
    "budget_exhausted": "idle",
    "spend_limit": "idle",
    "cancelled": "idle",
    "failed": "failed",
    "crashed": "idle",
    "interrupted": "idle",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Conversation:
    id: str
    state: ConversationState
    created_at: datetime
    updated_at: datetime
    owner: str | None = None
    persona: str | None = None
    title: str | None = None
    metadata: JSON = field(default_factory=dict)
    pinned: bool = False  # kept at the top of its owner's list
    archived_at: datetime | None = None  # out of the default list since then
    branch: Branch = WHOLE  # its current branch (``store.tree``); every row until it branches


@dataclass(frozen=True, slots=True)
class Turn:
    id: str
    conversation_id: str
    run_id: str
    status: Literal["running", "finished"]
    started_at: datetime
    kind: str = "user"
    stop_reason: TurnStopReason | None = None
    finished_at: datetime | None = None
    metrics: JSON = field(default_factory=dict)
    error: str | None = None
    timeline: JSON | None = None  # its steps' calls (``observe.ledger``); None until it ends
    holder: str | None = None  # the lease of the process that runs it (``ostinato.leases``)


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    id: str  # the tool_use id; unique within its turn (the key is turn_id + id)
    conversation_id: str
    turn_id: str
    name: str
    input: JSON
    status: ToolCallStatus
    started_at: datetime
    finished_at: datetime | None = None
    duration_s: float | None = None
    result: str | None = None
    is_error: bool = False


STEER = "steer"  # the queued message's metadata key that marks it steered


@dataclass(frozen=True, slots=True)
class QueuedInput:
    """A message that arrived while its conversation was busy: stored at once, run later."""

    id: str
    conversation_id: str
    message: Message
    created_at: datetime
    client_message_id: str | None = None
    position: int = 0  # assigned by the store: the arrival order across the whole store
    status: Literal["queued", "taken", "dropped"] = "queued"
    holder: str | None = None  # the lease of the process that will run it

    @property
    def steer(self) -> bool:
        """Sent with the ``steer`` policy: a running turn takes it at its next step
        (``loop.steering``); the mark is ``STEER`` in its message's metadata."""
        return self.message.metadata.get(STEER) is True


# --- write ops -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateConversation:
    """A new conversation, pinned to the agent versions ``pins`` names (agent, version;
    ``ostinato.pinning``) in the same write."""

    conversation: Conversation
    pins: tuple[tuple[str, int | None], ...] = ()


@dataclass(frozen=True, slots=True)
class SetConversationState:
    conversation_id: str
    state: ConversationState


@dataclass(frozen=True, slots=True)
class StartTurn:
    turn: Turn


@dataclass(frozen=True, slots=True)
class ClaimTurn:
    """Make ``holder`` the turn's holder if it still is ``holder_was`` (a lease id, or
    None); ``Conflict`` if not. Recovery claims a gone holder's turn in the write that
    closes it, so no one ever sees the turn taken over and still open."""

    turn_id: str
    holder_was: str | None
    holder: str | None


@dataclass(frozen=True, slots=True)
class FinishTurn:
    """Ends a turn and moves its conversation to the state that ending implies."""

    turn_id: str
    conversation_id: str
    stop_reason: TurnStopReason
    finished_at: datetime
    metrics: JSON = field(default_factory=dict)
    error: str | None = None
    timeline: JSON | None = None


@dataclass(frozen=True, slots=True)
class SetTurnMetrics:
    """Replaces a finished turn's metrics and timeline: work done for the turn after it
    ended (fact extraction) adds its model calls to them."""

    turn_id: str
    metrics: JSON
    timeline: JSON | None = None


@dataclass(slots=True)  # not frozen: made every step (docs/performance.md)
class AppendMessage:
    """Insert one message; the store allocates its ``seq``, ``id`` and ``created_at``.

    A tool call has one result: a message whose tool_result answers a call that already
    has one is refused whole with ``AlreadyAnswered`` (``store.answered``). A call is
    known by the turn that made it and its tool_use id: ``call_turns`` names the turn of
    each answered call made by another turn than ``turn_id`` (a card answered in a new
    turn, a call recovery or a later turn closes)."""

    conversation_id: str
    message: Message
    turn_id: str | None = None
    call_turns: Mapping[str, str] = field(default_factory=dict)
    at: datetime | None = None  # the row's time, kept by an import (None: now)


@dataclass(frozen=True, slots=True)
class AppendSummary:
    """Append a summary row (a hidden ``system`` message summarising every row up to
    ``through_seq``) through the one insert path; it becomes the compaction watermark.
    Returns the stored message."""

    conversation_id: str
    message: Message
    through_seq: int
    turn_id: str | None = None
    at: datetime | None = None  # the row's time, kept by an import (None: now)


@dataclass(frozen=True, slots=True)
class SetMessageMetadata:
    """Replace a stored row's metadata (``manage_messages`` marks rows folded into a
    summary or left out of the model's window); its blocks never change. ``NotFound``
    when the conversation has no row ``seq``."""

    conversation_id: str
    seq: int
    metadata: JSON


@dataclass(slots=True)  # not frozen: made every step (docs/performance.md)
class StartToolCall:
    record: ToolCallRecord


@dataclass(slots=True)  # not frozen: made every step (docs/performance.md)
class FinishToolCall:
    """Records how a tool call ended. A tool call is identified by its turn and its
    tool_use id: models reuse ids across conversations (some local servers number them
    from zero), so the id alone is not a key."""

    turn_id: str
    tool_call_id: str
    status: ToolCallStatus
    result: str
    is_error: bool
    finished_at: datetime
    duration_s: float
    # Whether the call may have changed anything outside the turn, so that its record
    # acknowledges something (SQLite's durable commits wait for it: ``wal_sync``). A
    # turn-zero seed (a memory recall, an attachment read) changed nothing: recovery may
    # replace its lost result like a reply's.
    side_effects: bool = True


@dataclass(frozen=True, slots=True)
class CreateApproval:
    approval: Approval


@dataclass(frozen=True, slots=True)
class DecideApproval:
    """Ends a pending approval; ``Conflict`` if it was already decided (nothing written)."""

    approval_id: str
    ending: Ending
    decided_at: datetime
    decided_by: str | None = None
    remember: Remember = "none"


@dataclass(frozen=True, slots=True)
class CreateGrant:
    grant: Grant


@dataclass(frozen=True, slots=True)
class RevokeGrant:
    grant_id: str
    revoked_at: datetime


@dataclass(frozen=True, slots=True)
class Enqueue:
    """Store a message for later; returns the ``QueuedInput`` with its ``position``."""

    item: QueuedInput


@dataclass(frozen=True, slots=True)
class TakeQueued:
    """Mark a queued input taken (its turn starts) or dropped; ``Conflict`` unless queued."""

    item_id: str
    status: Literal["taken", "dropped"] = "taken"


@dataclass(frozen=True, slots=True)
class EditQueued:
    """Replace a queued input's message (its text changed before it ran), or with no
    ``message`` withdraw it (``dropped``). ``NotFound`` for one that is not the
    conversation's, ``Conflict`` unless it is still queued."""

    conversation_id: str
    item_id: str
    message: Message | None = None


@dataclass(frozen=True, slots=True)
class SetToolSwitch:
    """Switch a tool on or off for a scope (a user, or ``conversation:<id>``)."""

    scope: str
    tool: str
    enabled: bool


WriteOp: TypeAlias = (
    CreateConversation
    | SetConversationState
    | StartTurn
    | ClaimTurn
    | FinishTurn
    | SetTurnMetrics
    | AppendMessage
    | AppendSummary
    | SetMessageMetadata
    | StartToolCall
    | FinishToolCall
    | CreateApproval
    | DecideApproval
    | CreateGrant
    | RevokeGrant
    | Enqueue
    | TakeQueued
    | EditQueued
    | RememberFact
    | ForgetFact
    | SetToolSwitch
    | DeleteConversation  # a conversation and everything stored for it (``store.erasure``)
    | EraseOwner  # everything of an owner (``store.erasure``)
    | AccountOp  # keys, limits, conversation settings (``store.accounts``)
    | RelationOp  # relations between facts, resolving conflicts (``store.relations``)
    | ForgedOp  # forged tools and their versions (``store.forged``)
    | McpServerOp  # per-person MCP servers (``store.mcp_servers``)
    | JobOp  # idle-gated background jobs: claims, runs, facts' use (``store.jobs``)
    | TreeOp  # moving a conversation's current branch (``store.branches``)
    | SpendOp  # a call's charge, with its reply's row (``store.spend``)
)


class Store(
    AccountReads,
    RelationReads,
    ForgedReads,
    McpServerReads,
    JobReads,
    SearchReads,
    TreeReads,
    Protocol,
):
    """What the loop, the turn manager and the server need from storage."""

    async def write(self, *ops: WriteOp) -> list[Any]:
        """Commit ``ops`` atomically; one result per op (a ``Message`` for appends)."""
        ...

    async def get_conversation(self, conversation_id: str) -> Conversation | None: ...

    async def conversation_and_window(
        self, conversation_id: str, *, limit: int
    ) -> tuple[Conversation | None, HistoryWindow]:
        """The conversation (None: no such one) and its current branch's ``window``, read
        together: what a turn begins with (one round trip on PostgreSQL)."""
        ...

    async def list_conversations(
        self,
        *,
        owner: str | None = None,
        limit: int = 50,
        before: str | None = None,
        archived: bool | None = None,
    ) -> list[Conversation]:
        """Newest first; ``before`` is the id of the last conversation of the previous page.
        ``archived``: only archived ones (True), only the others (False), or both (None)."""
        ...

    async def get_turn(self, turn_id: str) -> Turn | None: ...

    async def list_turns(self, conversation_id: str) -> list[Turn]: ...

    async def running_turns(self) -> list[Turn]: ...

    async def list_tool_calls(
        self, conversation_id: str, *, turn_id: str | None = None
    ) -> list[ToolCallRecord]: ...

    async def get_approval(self, approval_id: str) -> Approval | None: ...

    async def list_approvals(
        self, conversation_id: str | None = None, *, pending_only: bool = False
    ) -> list[Approval]:
        """Oldest first; all conversations when ``conversation_id`` is None."""
        ...

    async def get_grant(self, grant_id: str) -> Grant | None: ...

    async def list_grants(
        self,
        *,
        owner: str | None = None,
        conversation_id: str | None = None,
        include_revoked: bool = False,
    ) -> list[Grant]:
        """Grants of ``owner`` plus grants of ``conversation_id`` (either may be None),
        oldest first."""
        ...

    async def list_queued(self, conversation_id: str | None = None) -> list[QueuedInput]:
        """Inputs still queued, in arrival (``position``) order."""
        ...

    # --- long-term memory: reads -------------------------------------------------------

    async def get_memory(self, memory_id: str) -> MemoryFact | None: ...

    async def list_memories(
        self,
        scope: str,
        *,
        include_closed: bool = False,
        limit: int = 100,
        before: MemoryFact | None = None,
    ) -> list[MemoryFact]:
        """Facts of ``scope``, newest recorded first; current ones unless
        ``include_closed``. ``before``: the last fact of the previous page (the next page
        holds the facts after it in this order)."""
        ...

    async def search_memories(self, scope: str, query: str, *, limit: int = 10) -> list[MemoryHit]:
        """Current facts of ``scope`` that match words of ``query``, best first (full-text
        ranking). Any text is a valid query: operators are not interpreted; a query with
        no words finds nothing."""
        ...

    async def memory_conflicts(self, scope: str) -> list[MemoryConflict]:
        """Subjects of ``scope`` with more than one distinct current fact, by subject."""
        ...

    async def switched_off_tools(self, scope: str) -> frozenset[str]:
        """The tools ``scope`` has switched off."""
        ...

    async def close(self) -> None: ...


async def append(
    store: Store, conversation_id: str, message: Message, turn_id: str | None = None
) -> Message:
    """Append one message and return it as stored."""
    (stored,) = await store.write(AppendMessage(conversation_id, message, turn_id))
    assert isinstance(stored, Message)
    return stored
