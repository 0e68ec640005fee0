"""API keys, limit counters and conversation settings in SQL, for both engines: their
statements, how their ops run (through ``ops.Executor``), and their reads.

A limit op first takes the owner's lock (``pg_advisory_xact_lock`` on PostgreSQL until
commit; SQLite's one writer serialises already), then drops what has expired, counts,
and records only when under the limit: two processes racing for the last slot meet at
the lock, and the second one counts the first one's row.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Literal, TypeAlias, assert_never

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ostinato.errors import NotFound, StoreError
from ostinato.ids import new_id
from ostinato.store.accounts import (
    AccountOp,
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
from ostinato.store.base import Conversation
from ostinato.store.sql import rows
from ostinato.store.sql.rows import Row, TimeDecoder
from ostinato.store.sql.search_sql import reindex_title
from ostinato.store.sql.tables import api_keys, conversations, limit_events, limit_slots

AccountWriteName: TypeAlias = Literal[
    "insert_api_key",
    "revoke_api_key",
    "lock_owner_limits",
    "drop_expired_slots",
    "count_slots",
    "insert_slot",
    "release_slot",
    "renew_slot",
    "drop_old_events",
    "count_events",
    "insert_event",
    "find_conversation_row",
    "update_conversation",
]

# The first key of the advisory locks that serialise one owner's limit ops on PostgreSQL
# (the second is the owner's hash); memory writes use another class.
LIMIT_LOCK_CLASS = 0x6C696D  # "lim"


def _bind(table: sa.Table, *names: str) -> dict[str, sa.BindParameter[Any]]:
    return {name: sa.bindparam(name, type_=table.c[name].type) for name in names}


def _p(column: sa.Column[Any], name: str) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=column.type)


def account_statements(dialect: str) -> dict[Any, sa.Executable]:
    """The write statements of ``store.accounts`` ops for ``dialect``, by ``AccountWriteName``."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    owner = _p(limit_slots.c.owner, "owner")
    if dialect == "postgresql":
        lock: sa.Executable = sa.select(
            sa.func.pg_advisory_xact_lock(
                sa.literal_column(str(LIMIT_LOCK_CLASS)), sa.func.hashtext(owner)
            )
        )
    else:
        lock = sa.select(sa.literal_column("1"))
    slot_of = (limit_slots.c.owner == owner, limit_slots.c.kind == _p(limit_slots.c.kind, "kind"))
    event_of = (
        limit_events.c.owner == _p(limit_events.c.owner, "owner"),
        limit_events.c.kind == _p(limit_events.c.kind, "kind"),
    )
    return {
        "insert_api_key": insert(api_keys)
        .values(_bind(api_keys, *(c.name for c in api_keys.columns)))
        .on_conflict_do_nothing(index_elements=["id"]),
        # Revoking twice keeps the first time; the row comes back whole.
        "revoke_api_key": sa.update(api_keys)
        .where(api_keys.c.id == _p(api_keys.c.id, "b_id"))
        .values(
            revoked_at=sa.func.coalesce(
                api_keys.c.revoked_at, _p(api_keys.c.revoked_at, "b_revoked_at")
            )
        )
        .returning(*api_keys.columns),
        "lock_owner_limits": lock,
        "drop_expired_slots": sa.delete(limit_slots).where(
            *slot_of, limit_slots.c.expires_at <= _p(limit_slots.c.expires_at, "now")
        ),
        "count_slots": sa.select(sa.func.count()).select_from(limit_slots).where(*slot_of),
        "insert_slot": insert(limit_slots).values(
            _bind(limit_slots, "id", "owner", "kind", "expires_at")
        ),
        "release_slot": sa.delete(limit_slots).where(
            limit_slots.c.id == _p(limit_slots.c.id, "b_id")
        ),
        "renew_slot": sa.update(limit_slots)
        .where(limit_slots.c.id == _p(limit_slots.c.id, "b_id"))
        .values(_bind(limit_slots, "expires_at")),
        "drop_old_events": sa.delete(limit_events).where(
            *event_of, limit_events.c.at <= _p(limit_events.c.at, "since")
        ),
        "count_events": sa.select(sa.func.count(), sa.func.min(limit_events.c.at))
        .select_from(limit_events)
        .where(*event_of),
        "insert_event": insert(limit_events).values(
            _bind(limit_events, "id", "owner", "kind", "at")
        ),
        **_conversation_statements(dialect),
    }


def _conversation_statements(dialect: str) -> dict[Any, sa.Executable]:
    """Reading and changing a conversation's settings. On PostgreSQL the read locks the
    row until commit, so two changes made at once (a rename, a title being made) are
    applied one after the other, each to what the other left."""
    settings = ("title", "metadata", "persona", "pinned", "archived_at", "updated_at")
    found = sa.select(conversations).where(conversations.c.id == _p(conversations.c.id, "b_id"))
    return {
        "find_conversation_row": found.with_for_update() if dialect == "postgresql" else found,
        "update_conversation": sa.update(conversations)
        .where(conversations.c.id == _p(conversations.c.id, "b_id"))
        .values(_bind(conversations, *settings)),
    }


def apply_account_op(ex: Any, op: AccountOp, now: datetime) -> Any:
    """Run one ``store.accounts`` op on ``ex`` (an ``ops.Executor``) at time ``now``."""
    match op:
        case CreateApiKey(key=key):
            params = {
                "id": key.id,
                "owner": key.owner,
                "name": key.name,
                "secret_hash": key.secret_hash,
                "created_at": ex.time(key.created_at),
                "expires_at": ex.time(key.expires_at) if key.expires_at else None,
                "revoked_at": ex.time(key.revoked_at) if key.revoked_at else None,
            }
            if not ex.execute("insert_api_key", params):
                raise StoreError(f"API key {key.id!r} exists")
            return None
        case RevokeApiKey(key_id=kid, revoked_at=when):
            found = ex.row("revoke_api_key", {"b_id": kid, "b_revoked_at": ex.time(when)})
            if found is None:
                raise NotFound(f"no API key {kid!r}")
            return api_key(found, ex.read_time)
        case AcquireSlot() | RecordEvent():
            return _admit(ex, op, now)
        case ReleaseSlots(slot_ids=ids):
            for sid in ids:
                ex.execute("release_slot", {"b_id": sid})
            return None
        case RenewSlots(slot_ids=ids, expires_at=until):
            for sid in ids:
                ex.execute("renew_slot", {"b_id": sid, "expires_at": ex.time(until)})
            return None
        case UpdateConversation():
            return _update_conversation(ex, op, now)
        case _:
            assert_never(op)


def _admit(ex: Any, op: AcquireSlot | RecordEvent, now: datetime) -> Admission:
    ex.row("lock_owner_limits", {"owner": op.owner})
    where = {"owner": op.owner, "kind": op.kind}
    if isinstance(op, AcquireSlot):
        ex.execute("drop_expired_slots", {**where, "now": ex.time(now)})
        held = ex.returning("count_slots", where)
        if held >= op.limit:
            return Admission(False, op.retry_after, held)
        params = {**where, "id": op.slot_id, "expires_at": ex.time(op.expires_at)}
        ex.execute("insert_slot", params)
        return Admission(True, 0.0, held)
    since = now - timedelta(seconds=op.window_s)
    ex.execute("drop_old_events", {**where, "since": ex.time(since)})
    held, oldest = ex.row("count_events", where)
    if held >= op.limit:
        wait = (ex.read_time(oldest) - since).total_seconds() if oldest is not None else 1.0
        return Admission(False, max(wait, 0.001), held)
    ex.execute("insert_event", {**where, "id": new_id(), "at": ex.time(now)})
    return Admission(True, 0.0, held)


def _update_conversation(ex: Any, op: UpdateConversation, now: datetime) -> Conversation:
    found = ex.row("find_conversation_row", {"b_id": op.conversation_id})
    if found is None:
        raise NotFound(f"no conversation {op.conversation_id!r}")
    current = rows.conversation(found, ex.read_time)
    if not op.expects(current.title):
        return current
    changed = dataclasses.replace(current, updated_at=now, **op.changes())
    params = {
        "b_id": op.conversation_id,
        "title": changed.title,
        "metadata": json.dumps(changed.metadata, ensure_ascii=False, separators=(",", ":")),
        "persona": changed.persona,
        "pinned": changed.pinned,
        "archived_at": ex.time(changed.archived_at) if changed.archived_at else None,
        "updated_at": ex.time(now),
    }
    ex.execute("update_conversation", params)
    if changed.title != current.title:
        reindex_title(ex, changed.id, changed.owner, changed.title)
    return changed


def api_key(row: Row, decode: TimeDecoder) -> ApiKey:
    kid, owner, name, secret_hash, created_at, expires_at, revoked_at = row
    return ApiKey(
        id=kid,
        owner=owner,
        name=name,
        secret_hash=secret_hash,
        created_at=decode(created_at),
        expires_at=None if expires_at is None else decode(expires_at),
        revoked_at=None if revoked_at is None else decode(revoked_at),
    )


_GET_KEY = sa.select(api_keys).where(api_keys.c.id == _p(api_keys.c.id, "id"))
_ALL_KEYS = sa.select(api_keys).order_by(api_keys.c.created_at, api_keys.c.id)
_OWNER_KEYS = _ALL_KEYS.where(api_keys.c.owner == _p(api_keys.c.owner, "owner"))


class AccountReads:
    """The key reads of ``SQLReads`` (an engine supplies ``_fetch`` and ``_decode_time``)."""

    _decode_time: TimeDecoder

    async def _fetch(self, stmt: sa.Executable, params: dict[str, Any]) -> Sequence[Row]:
        raise NotImplementedError

    async def get_api_key(self, key_id: str) -> ApiKey | None:
        if "\x00" in key_id:
            return None  # PostgreSQL text cannot hold NUL: no key has one
        found = await self._fetch(_GET_KEY, {"id": key_id})
        return api_key(found[0], self._decode_time) if found else None

    async def list_api_keys(self, owner: str | None = None) -> list[ApiKey]:
        if owner is None:
            found = await self._fetch(_ALL_KEYS, {})
        else:
            found = await self._fetch(_OWNER_KEYS, {"owner": owner})
        return [api_key(r, self._decode_time) for r in found]
