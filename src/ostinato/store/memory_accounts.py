"""``MemoryStore``'s writes of keys, limit counters and conversation settings
(``store.accounts``), one function per op as in ``memory_writes``: the reference
semantics the SQL engines match."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ostinato.errors import NotFound, StoreError
from ostinato.store.accounts import (
    AcquireSlot,
    Admission,
    ApiKey,
    CreateApiKey,
    RecordEvent,
    ReleaseSlots,
    RenewSlots,
    RevokeApiKey,
    UpdateConversation,
)
from ostinato.store.base import Conversation, utcnow

if TYPE_CHECKING:
    from ostinato.store.memory_tables import MemoryTables

Undo = list[Callable[[], None]]


def _keep(table: dict[Any, Any], key: Any, undo: Undo) -> None:
    """Record how to put ``table[key]`` back as it is now."""
    if key in table:
        old = table[key]
        undo.append(lambda: table.__setitem__(key, old))
    else:
        undo.append(lambda: table.__delitem__(key))


def _create_key(t: MemoryTables, op: CreateApiKey, undo: Undo) -> None:
    if op.key.id in t._keys:
        raise StoreError(f"API key {op.key.id!r} exists")
    _keep(t._keys, op.key.id, undo)
    t._keys[op.key.id] = op.key


def _revoke_key(t: MemoryTables, op: RevokeApiKey, undo: Undo) -> ApiKey:
    found = t._keys.get(op.key_id)
    if found is None:
        raise NotFound(f"no API key {op.key_id!r}")
    if found.revoked_at is None:
        _keep(t._keys, op.key_id, undo)
        t._keys[op.key_id] = dataclasses.replace(found, revoked_at=op.revoked_at)
    return t._keys[op.key_id]


def _move_slots(t: MemoryTables, op: ReleaseSlots | RenewSlots, undo: Undo) -> None:
    for sid in op.slot_ids:
        if sid not in t._slots:
            continue  # released already, or expired and dropped
        _keep(t._slots, sid, undo)
        if isinstance(op, ReleaseSlots):
            del t._slots[sid]
        else:
            owner, kind, _ = t._slots[sid]
            t._slots[sid] = (owner, kind, op.expires_at)


def _acquire(t: MemoryTables, op: AcquireSlot, undo: Undo) -> Admission:
    now = utcnow()
    live = [
        sid
        for sid, (owner, kind, until) in t._slots.items()
        if owner == op.owner and kind == op.kind and until > now
    ]
    if len(live) >= op.limit:
        return Admission(False, op.retry_after, len(live))
    _keep(t._slots, op.slot_id, undo)
    t._slots[op.slot_id] = (op.owner, op.kind, op.expires_at)
    return Admission(True, 0.0, len(live))


def _record(t: MemoryTables, op: RecordEvent, undo: Undo) -> Admission:
    now = utcnow()
    since = now - timedelta(seconds=op.window_s)
    t._events[:] = [e for e in t._events if e[2] > since]
    mine = [at for owner, kind, at in t._events if owner == op.owner and kind == op.kind]
    if len(mine) >= op.limit:
        wait = (min(mine) - since).total_seconds()
        return Admission(False, max(wait, 0.001), len(mine))
    event = (op.owner, op.kind, now)
    t._events.append(event)
    undo.append(lambda: t._events.remove(event))
    return Admission(True, 0.0, len(mine))


def _update_conversation(t: MemoryTables, op: UpdateConversation, undo: Undo) -> Conversation:
    cid = op.conversation_id
    found = t._conversations.get(cid)
    if found is None:
        raise NotFound(f"no conversation {cid!r}")
    if not op.expects(found.title):
        return found
    _keep(t._conversations, cid, undo)
    _keep(t._updated, cid, undo)
    now = utcnow()
    changed = dataclasses.replace(found, updated_at=now, **op.changes())
    t._conversations[cid] = changed
    t._updated[cid] = now
    return changed


ACCOUNT_WRITES: dict[type, Callable[[Any, Any, Undo], Any]] = {
    CreateApiKey: _create_key,
    RevokeApiKey: _revoke_key,
    AcquireSlot: _acquire,
    RecordEvent: _record,
    ReleaseSlots: _move_slots,
    RenewSlots: _move_slots,
    UpdateConversation: _update_conversation,
}
"""The write function of each ``store.accounts`` op (``memory_writes.WRITES`` has them)."""


def api_key(t: MemoryTables, key_id: str) -> ApiKey | None:
    return t._keys.get(key_id)


def api_keys(t: MemoryTables, owner: str | None) -> list[ApiKey]:
    keys = sorted(t._keys.values(), key=lambda k: (k.created_at, k.id))
    return [k for k in keys if owner is None or k.owner == owner]
