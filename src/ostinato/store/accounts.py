"""The store's side of identity: owners' API keys, the counters that limit owners, and the
conversation settings an owner changes.

An API key is kept as its id and a hash of its secret, never the secret itself (see
``ostinato.identity.keys``). A limit is counted in the store so that several server
processes on one database share it:

- a *slot* is something an owner holds for a while (a running turn, an open stream):
  ``AcquireSlot`` takes one if fewer than ``limit`` are held, ``ReleaseSlots`` gives them
  back, ``RenewSlots`` keeps them from expiring. A slot whose holder died (a crashed
  process) expires by itself, so a limit never stays used up.
- an *event* is something counted over a sliding window (turns per minute):
  ``RecordEvent`` records one if fewer than ``limit`` happened in the last ``window_s``.

Both answer with an ``Admission``: granted, or refused with the seconds to wait. Both
serialise per owner (an advisory lock on PostgreSQL, the one writer on SQLite), so two
processes racing for the last slot cannot both get it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, TypeAlias

SlotKind: TypeAlias = Literal["turn", "stream"]
EventKind: TypeAlias = Literal["turn", "owner"]  # owner: a new anonymous owner minted


@dataclass(frozen=True, slots=True)
class ApiKey:
    """An API key as stored: whose it is, and the hash of its secret."""

    id: str
    owner: str
    name: str
    secret_hash: str  # hex SHA-256 of the secret part of the key
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None

    def usable(self, now: datetime) -> bool:
        """Neither revoked nor expired at ``now``."""
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


@dataclass(frozen=True, slots=True)
class Admission:
    """The answer to ``AcquireSlot`` or ``RecordEvent``."""

    granted: bool
    retry_after: float = 0.0  # seconds, when refused
    held: int = 0  # how many the owner held (or recorded in the window) before this one


# --- write ops -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateApiKey:
    """Store a new key; ``StoreError`` if its id is taken."""

    key: ApiKey


@dataclass(frozen=True, slots=True)
class RevokeApiKey:
    """Revoke a key (revoking twice keeps the first time); returns the revoked ``ApiKey``,
    ``NotFound`` if there is none by that id."""

    key_id: str
    revoked_at: datetime


@dataclass(frozen=True, slots=True)
class AcquireSlot:
    """Take slot ``slot_id`` of ``kind`` for ``owner`` until ``expires_at``, if the owner
    holds fewer than ``limit`` live ones; returns an ``Admission``."""

    owner: str
    kind: SlotKind
    slot_id: str
    limit: int
    expires_at: datetime
    retry_after: float = 5.0  # what a refusal suggests (a slot frees when its holder ends)


@dataclass(frozen=True, slots=True)
class ReleaseSlots:
    slot_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RenewSlots:
    """Move the expiry of live slots (released or expired ones are left alone)."""

    slot_ids: tuple[str, ...]
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class RecordEvent:
    """Record one event of ``kind`` for ``owner`` if fewer than ``limit`` were recorded in
    the last ``window_s`` seconds; returns an ``Admission`` (``retry_after``: until the
    oldest one in the window leaves it)."""

    owner: str
    kind: EventKind
    limit: int
    window_s: float


_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class UpdateConversation:
    """Change a conversation's title, metadata (replaced whole), persona, pin or archive
    time (None: not archived); a field left out is kept. Returns the updated
    ``Conversation``; ``NotFound`` if there is none. With ``expect_title``, a compare
    and set: a conversation whose title is not that one is left as it is (and
    returned so). ``made``: a title the server made (``titles.Titler``), which answers
    no client, so its commit is not waited for on disk (``wal_sync.acknowledges``)."""

    conversation_id: str
    title: str | None = _UNSET
    metadata: dict[str, Any] = field(default=_UNSET)
    persona: str | None = _UNSET
    pinned: bool = _UNSET
    archived_at: datetime | None = _UNSET
    expect_title: str | None = _UNSET
    made: bool = False

    def expects(self, title: str | None) -> bool:
        """Whether a conversation titled ``title`` is to be changed (``expect_title``)."""
        return self.expect_title is _UNSET or self.expect_title == title

    def changes(self) -> dict[str, Any]:
        """The fields this op sets, by name."""
        named = {
            "title": self.title,
            "metadata": self.metadata,
            "persona": self.persona,
            "pinned": self.pinned,
            "archived_at": self.archived_at,
        }
        return {name: value for name, value in named.items() if value is not _UNSET}


AccountOp: TypeAlias = (
    CreateApiKey
    | RevokeApiKey
    | AcquireSlot
    | ReleaseSlots
    | RenewSlots
    | RecordEvent
    | UpdateConversation
)
ACCOUNT_OPS = (
    CreateApiKey,
    RevokeApiKey,
    AcquireSlot,
    ReleaseSlots,
    RenewSlots,
    RecordEvent,
    UpdateConversation,
)


class AccountReads(Protocol):
    """The reads a ``Store`` offers for keys."""

    async def get_api_key(self, key_id: str) -> ApiKey | None: ...

    async def list_api_keys(self, owner: str | None = None) -> list[ApiKey]:
        """Keys (revoked and expired ones too), oldest first; all owners' when None."""
        ...
