"""Long-term memory's records: facts, search hits, conflicts, the checks a fact's text
and subject pass before they are stored, and the write ops that remember and forget a
fact (all re-exported by ``store.base``).

Facts are what a model or a person asked to keep, per scope (an owner, or
``conversation:<id>`` for a conversation without one). Bitemporal: ``valid_from`` /
``valid_to`` say when the fact held (``valid_to`` None while current), ``recorded_at``
when the store learned it. Closing a fact (forget, supersede) sets ``valid_to``; nothing
is ever deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ostinato.errors import Conflict, InvalidRequest

MEMORY_TEXT_LIMIT = 2_000  # characters in one fact
MEMORY_SUBJECT_LIMIT = 200  # characters in a subject, after normalising
MEMORY_CAPACITY = 5_000  # current facts per scope, unless an op says otherwise


def normalize_subject(subject: str | None) -> str | None:
    """A subject as stored: lower case, control characters as spaces, single spaces,
    None when blank."""
    if subject is None:
        return None
    subject = subject.encode("utf-8", "replace").decode("utf-8")  # unpaired surrogates
    visible = "".join(" " if ch < " " or ch == "\x7f" else ch for ch in subject)
    cleaned = " ".join(visible.split()).lower()[:MEMORY_SUBJECT_LIMIT].rstrip()
    return cleaned or None


def check_fact_text(text: str) -> str:
    """A fact's text as stored (stripped); ``InvalidRequest`` if empty or too long."""
    cleaned = text.strip()
    if not cleaned:
        raise InvalidRequest("a fact needs some text")
    if "\x00" in cleaned:
        raise InvalidRequest("a fact cannot contain NUL characters")
    try:
        cleaned.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequest(
            "a fact must be valid Unicode (it has an unpaired surrogate)"
        ) from None
    if len(cleaned) > MEMORY_TEXT_LIMIT:
        raise InvalidRequest(
            f"a fact is at most {MEMORY_TEXT_LIMIT:,} characters (this one has {len(cleaned):,});"
            " split it or shorten it"
        )
    return cleaned


@dataclass(frozen=True, slots=True)
class MemoryFact:
    id: str
    scope: str
    text: str
    valid_from: datetime
    recorded_at: datetime
    valid_to: datetime | None = None  # None while the fact is current
    subject: str | None = None  # normalised (``normalize_subject``)
    supersedes: str | None = None  # the fact this one replaced
    superseded_by: str | None = None  # the fact that replaced this one
    conversation_id: str | None = None  # where it was learned, if in a conversation
    turn_id: str | None = None

    @property
    def current(self) -> bool:
        return self.valid_to is None


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """A fact found by a search; ``score`` is higher for a better match, and comparable
    only within one search (each engine ranks its own way)."""

    fact: MemoryFact
    score: float


@dataclass(frozen=True, slots=True)
class MemoryConflict:
    """Current facts of one scope that share a subject but say different things."""

    subject: str
    facts: list[MemoryFact]  # oldest first


class MemoryFull(Conflict):
    """A scope holds as many current facts as it may: the write is refused, nothing is
    evicted."""

    code = "memory_full"

    def __init__(self, count: int, capacity: int) -> None:
        super().__init__(f"memory is full: {count} of {capacity} facts; forget some first")
        self.count = count
        self.capacity = capacity


# --- write ops ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RememberFact:
    """Record a current fact in ``scope``; returns the stored ``MemoryFact``.

    The store gives it an id (unless ``id`` is set) and ``recorded_at`` (the time of the
    write unless ``recorded_at`` is given: an import keeps the exporting store's;
    ``valid_from`` is ``recorded_at`` unless given). With ``supersedes``, that fact
    (current, same scope) is closed and the two are linked in the same write:
    ``NotFound`` if there is no such fact in this scope, ``Conflict`` if it is already
    closed. ``MemoryFull`` when the scope already holds ``capacity`` current facts (a
    superseded fact does not count); ``InvalidRequest`` for an empty text or one over
    ``MEMORY_TEXT_LIMIT`` characters.
    """

    scope: str
    text: str
    subject: str | None = None
    supersedes: str | None = None
    conversation_id: str | None = None
    turn_id: str | None = None
    capacity: int = MEMORY_CAPACITY
    id: str | None = None
    valid_from: datetime | None = None
    recorded_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ForgetFact:
    """Close a current fact of ``scope`` (``valid_to`` = now): it leaves recall and stays
    as history. Returns the closed ``MemoryFact``; forgetting a closed fact returns it
    unchanged. ``NotFound`` for an unknown fact or another scope's."""

    scope: str
    memory_id: str
