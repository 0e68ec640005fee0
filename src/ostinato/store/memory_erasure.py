"""The in-memory store's ``DeleteConversation`` and ``EraseOwner`` (``store.erasure``):
every table's rows of the conversation (or owner) dropped, each drop undoable, as the
other memory writes are."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ostinato.errors import NotFound
from ostinato.store.erasure import DeleteConversation, EraseOwner, conversation_scope

if TYPE_CHECKING:
    from ostinato.store.memory_tables import MemoryTables

Undo = list[Callable[[], None]]


def _drop(table: dict[Any, Any], gone: Callable[[Any, Any], bool], undo: Undo) -> None:
    """Drop the entries for which ``gone(key, value)``; recorded for undo."""
    dropped = {k: v for k, v in table.items() if gone(k, v)}
    for key in dropped:
        del table[key]
    if dropped:
        undo.append(lambda: table.update(dropped))


def _putting(table: dict[Any, Any], key: Any, value: Any) -> Callable[[], None]:
    return lambda: table.__setitem__(key, value)


def _unlink(table: dict[Any, Any], cid: str, undo: Undo) -> None:
    """Clear the link to conversation ``cid`` of the records that name it."""
    for key, value in list(table.items()):
        if getattr(value, "conversation_id", None) == cid:
            undo.append(_putting(table, key, value))
            changes = {"conversation_id": None}
            if hasattr(value, "turn_id"):
                changes["turn_id"] = None
            table[key] = dataclasses.replace(value, **changes)


def delete_conversation(t: MemoryTables, op: DeleteConversation, undo: Undo) -> None:
    cid = op.conversation_id
    if cid not in t._conversations:
        raise NotFound(f"no conversation {cid!r}")
    scope = conversation_scope(cid)

    def of_it(_: Any, value: Any) -> bool:
        return getattr(value, "conversation_id", None) == cid

    for by_id in (t._conversations, t._messages, t._updated, t._summaries, t._pins):
        _drop(by_id, lambda key, _: key == cid, undo)
    for table in (t._turns, t._tool_calls, t._approvals, t._grants, t._queue, t._schedules):
        _drop(table, of_it, undo)
    answered = {key for key in t._answered if key[0] == cid}
    if answered:
        t._answered -= answered
        undo.append(lambda: t._answered.update(answered))
    _drop(t._protocol_records, of_it, undo)
    _drop(t._request_keys, of_it, undo)  # type: ignore[attr-defined]
    _drop(t._memories, lambda _, fact: fact.scope == scope, undo)
    _drop(t._relations, lambda _, relation: relation.scope == scope, undo)
    _drop(t._fact_uses, lambda key, _: key[0] == scope, undo)
    _drop(t._switches, lambda key, _: key[0] == scope, undo)
    _unlink(t._memories, cid, undo)
    for name, versions in list(t._forged.items()):
        if any(v.conversation_id == cid for v in versions):
            undo.append(_putting(t._forged, name, versions))
            t._forged[name] = [
                dataclasses.replace(v, conversation_id=None) if v.conversation_id == cid else v
                for v in versions
            ]


OWNER_TABLES = (
    "_keys",
    "_slots",
    "_grants",
    "_forged",
    "_mcp_servers",
    "_schedules",
    "_protocol_records",
    "_request_keys",
    "_job_states",
    "_job_runs",
    "_fact_uses",
    "_spend_days",
    "_spend_holds",
    "_usage_days",
    "_memories",
    "_relations",
    "_switches",
)
"""The memory tables that hold an owner's rows (as ``erasure.OWNER_ROWS`` and the scoped
tables do for SQL)."""


def _theirs(owner: str) -> Callable[[Any, Any], bool]:
    """Whether an entry is ``owner``'s: by its record's owner or scope, by the owner in
    its key, or (a list of versions) by its records'."""

    def of(value: Any) -> bool:
        if isinstance(value, list):
            return any(of(v) for v in value)
        if isinstance(value, tuple):
            return bool(value) and value[0] == owner
        return owner in (getattr(value, "owner", None), getattr(value, "scope", None))

    return lambda key, value: (isinstance(key, tuple) and owner in key) or of(value)


def erase_owner(t: MemoryTables, op: EraseOwner, undo: Undo) -> list[str]:
    ids = [cid for cid, c in t._conversations.items() if c.owner == op.owner]
    gone = set(ids)
    _drop(t._memories, lambda _, fact: fact.conversation_id in gone, undo)
    for cid in ids:
        delete_conversation(t, DeleteConversation(cid), undo)
    for name in OWNER_TABLES:
        _drop(getattr(t, name), _theirs(op.owner), undo)
    events = list(t._events)
    t._events[:] = [e for e in events if e[0] != op.owner]
    undo.append(lambda: t._events.__setitem__(slice(None), events))
    return ids
