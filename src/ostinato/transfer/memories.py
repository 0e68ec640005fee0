"""An owner's memories in the export file (``memories``, only when asked): written a page
of facts at a time, read back as ``RememberFact`` ops of the importer's write.

Only current facts travel: a forgotten or superseded fact is history of the exporting
store, and relations between facts stay there too. An imported fact gets a new id in the
importer's scope and keeps its text, subject, ``valid_from`` and ``recorded_at``; the
conversation and turn it was learned in are kept when that conversation is in the file
(as its new ids), and dropped otherwise.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from ostinato.errors import InvalidRequest
from ostinato.store.base import (
    MEMORY_CAPACITY,
    RememberFact,
    Store,
    WriteOp,
    check_fact_text,
)
from ostinato.transfer.document import ImportRefused, MemoryRow

PAGE = 500  # facts read from the store at a time


def memory_row(fact: Any) -> dict[str, Any]:
    return {
        "id": fact.id,
        "text": fact.text,
        "subject": fact.subject,
        "valid_from": fact.valid_from.isoformat(),
        "recorded_at": fact.recorded_at.isoformat(),
        "conversation_id": fact.conversation_id,
        "turn_id": fact.turn_id,
    }


async def memories_json(store: Store, scope: str) -> AsyncIterator[str]:
    """The current facts of ``scope`` as the items of the ``memories`` list, newest
    recorded first, comma-separated, a page at a time."""
    first = True
    before = None
    while True:
        page = await store.list_memories(scope, limit=PAGE, before=before)
        for fact in page:
            yield ("" if first else ",") + json.dumps(
                memory_row(fact), ensure_ascii=False, separators=(",", ":")
            )
            first = False
        if len(page) < PAGE:
            return
        before = page[-1]


@dataclass
class Links:
    """What the import made of the file's conversations: the new id of each, and of its
    turns (old id -> new id)."""

    conversations: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)

    def add(self, old: str, new: str, turns: dict[str, str]) -> None:
        self.conversations[old] = (new, turns)


def memory_ops(
    rows: list[MemoryRow], owner: str, links: Links, capacity: int = MEMORY_CAPACITY
) -> list[WriteOp]:
    """One ``RememberFact`` per row, oldest first (so the importer lists them in the
    file's order); ``ImportRefused`` naming a row whose text cannot be a fact. The write
    raises ``MemoryFull`` when the owner's current facts would pass ``capacity``."""
    ops: list[WriteOp] = []
    for i, row in reversed(list(enumerate(rows))):
        try:
            text = check_fact_text(row.text)
        except InvalidRequest as exc:
            raise ImportRefused(f"memories[{i}].text: {exc.message}") from None
        made = links.conversations.get(row.conversation_id or "")
        conversation_id, turn_id = None, None
        if made is not None:
            conversation_id, turns = made
            turn_id = turns.get(row.turn_id or "")
        ops.append(
            RememberFact(
                scope=owner,
                text=text,
                subject=row.subject,
                conversation_id=conversation_id,
                turn_id=turn_id,
                valid_from=row.valid_from,
                recorded_at=row.recorded_at,
                capacity=capacity,
            )
        )
    return ops
