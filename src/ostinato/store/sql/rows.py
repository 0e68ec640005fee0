"""Stored rows back into the store's dataclasses (and ``approvals``'), for both engines,
and the one JSON encoding of stored values (``dump_json``).

A row is a sequence of column values in table column order (``statements`` selects
whole rows). Engines differ in two column kinds only, so each decoder takes a
``TimeDecoder`` for timestamps: SQLite hands back UTC text, PostgreSQL aware datetimes.
Booleans come back as 0/1 from SQLite; ``bool()`` covers both.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeAlias

from ostinato.approvals import Approval, Ending, Grant
from ostinato.messages import JSON, Message, blocks_from_json
from ostinato.store.base import Conversation, MemoryFact, QueuedInput, ToolCallRecord, Turn
from ostinato.store.tree import Branch

TimeDecoder: TypeAlias = Callable[[Any], datetime]
Row: TypeAlias = Sequence[Any]

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
# What ``_ENCODER.encode`` builds on every call, built once: the C encoder (without the
# check for circular values, which stored values never are).
_C_ENCODE = (
    json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, True
    )
    if json.encoder.c_make_encoder is not None  # type: ignore[attr-defined]
    else None
)


def dump_json(value: JSON | list[JSON]) -> str:
    """The one JSON encoding of stored values (compact, UTF-8 kept as is)."""
    if not value:
        return "{}" if isinstance(value, dict) else "[]"
    if _C_ENCODE is None:
        return _ENCODER.encode(value)
    return "".join(_C_ENCODE(value, 0))


def sqlite_time(value: datetime) -> str:
    """A timestamp as SQLite stores it: UTC text that sorts in time order."""
    if value.tzinfo is UTC:  # ``utcnow``'s: the text without its ``+00:00``
        return value.isoformat(" ", "microseconds")[:26]
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value.isoformat(sep=" ", timespec="microseconds")


def time_from_sqlite(value: Any) -> datetime:
    """Read SQLite's UTC text (with or without an offset) as an aware UTC datetime."""
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def utc_time(value: datetime) -> datetime:
    """An aware datetime as an aware UTC datetime (naive values are taken as UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value if value.utcoffset() == UTC.utcoffset(None) else value.astimezone(UTC)


def time_from_postgres(value: Any) -> datetime:
    """asyncpg reads ``timestamptz`` as an aware datetime already; make it UTC."""
    assert isinstance(value, datetime)
    return utc_time(value)


def _opt_time(value: Any, decode: TimeDecoder) -> datetime | None:
    return None if value is None else decode(value)


def _object(text: str) -> JSON:
    """A stored JSON object (most are empty: skip the parser for those)."""
    return {} if text == "{}" else json.loads(text)


class MessageCache:
    """Decoded messages by id, up to ``max_bytes`` of stored blocks text.

    A message's blocks never change once written; its metadata may
    (``SetMessageMetadata``, possibly by another process), so an entry is used only while
    the row's stored metadata text is the one it was decoded from; reads of a growing
    history then decode only its new or changed rows. Oldest entries are dropped first.
    """

    def __init__(self, max_bytes: int = 32 * 1024 * 1024) -> None:
        self._max_bytes = max_bytes
        self._bytes = 0
        self._items: dict[str, tuple[Message, int, str]] = {}

    def messages(self, found: Sequence[Row], decode: TimeDecoder) -> list[Message]:
        """``found`` message rows as messages, decoding only those not seen before."""
        items = self._items
        out: list[Message] = []
        for row in found:
            hit = items.get(row[0])
            if hit is None or hit[2] != row[7]:
                decoded = message(row, decode)
                self._put(row[0], decoded, len(row[5]), row[7])
                out.append(decoded)
            else:
                out.append(hit[0])
        return out

    def written(self, results: Sequence[Any]) -> None:
        """Keep the messages a write just stored (those among ``results``), so the next
        read of the history does not decode them: they are what the rows hold, and what
        live surfaces were shown."""
        for result in results:
            if type(result) is Message and result.id is not None:
                size = 64 * len(result.blocks)
                for block in result.blocks:  # each block's text (a tool result's, when text)
                    text = getattr(block, "text", None) or getattr(block, "content", None)
                    if isinstance(text, str):
                        size += len(text)
                self._put(result.id, result, size, dump_json(result.metadata))

    def _put(self, key: str, value: Message, size: int, metadata: str) -> None:
        if size > self._max_bytes // 16:
            return  # one huge row would push out everything else
        old = self._items.pop(key, None)
        if old is not None:
            self._bytes -= old[1]
        self._items[key] = (value, size, metadata)
        self._bytes += size
        while self._bytes > self._max_bytes:
            _, dropped, _ = self._items.pop(next(iter(self._items)))  # dicts keep insertion order
            self._bytes -= dropped


def conversation(row: Row, decode: TimeDecoder) -> Conversation:
    cid, owner, state, persona, title, metadata, created_at, updated_at, *more = row
    pinned, archived, ranges, since, _ = more
    return Conversation(
        id=cid,
        state=state,
        created_at=decode(created_at),
        updated_at=decode(updated_at),
        owner=owner,
        persona=persona,
        title=title,
        metadata=_object(metadata),
        pinned=bool(pinned),
        archived_at=None if archived is None else decode(archived),
        branch=Branch.stored(ranges, since),
    )


def turn(row: Row, decode: TimeDecoder) -> Turn:
    (
        tid,
        cid,
        run_id,
        kind,
        status,
        stop_reason,
        started,
        finished,
        metrics,
        error,
        timeline,
        holder,
    ) = row
    return Turn(
        id=tid,
        conversation_id=cid,
        run_id=run_id,
        status=status,
        started_at=decode(started),
        kind=kind,
        stop_reason=stop_reason,
        finished_at=_opt_time(finished, decode),
        metrics=_object(metrics),
        error=error,
        timeline=json.loads(timeline) if timeline is not None else None,
        holder=holder,
    )


def message(row: Row, decode: TimeDecoder) -> Message:
    mid, _cid, turn_id, seq, role, blocks, hidden, metadata, created_at, parent = row
    return Message(
        role=role,
        blocks=blocks_from_json(json.loads(blocks)),
        hidden=bool(hidden),
        metadata=json.loads(metadata),
        seq=seq,
        id=mid,
        turn_id=turn_id,
        created_at=decode(created_at),
        parent_seq=seq - 1 if parent is None else parent,  # NULL: the row before it
    )


def tool_call(row: Row, decode: TimeDecoder) -> ToolCallRecord:
    turn_id, tcid, cid, name, input_, status, result, is_error, started, finished, dur = row
    return ToolCallRecord(
        id=tcid,
        conversation_id=cid,
        turn_id=turn_id,
        name=name,
        input=_object(input_),
        status=status,
        started_at=decode(started),
        finished_at=_opt_time(finished, decode),
        duration_s=dur,
        result=result,
        is_error=bool(is_error),
    )


def approval(row: Row, decode: TimeDecoder) -> Approval:
    (
        aid,
        cid,
        turn_id,
        tool_use_id,
        tool,
        arguments,
        arguments_hash,
        risk,
        family,
        status,
        ending,
        requested_at,
        decided_at,
        decided_by,
        remember,
    ) = row
    return Approval(
        id=aid,
        conversation_id=cid,
        turn_id=turn_id,
        tool_use_id=tool_use_id,
        tool=tool,
        arguments=_object(arguments),
        arguments_hash=arguments_hash,
        risk=risk,
        family=family,
        requested_at=decode(requested_at),
        status=status,
        ending=None if ending is None else Ending(ending),
        decided_at=_opt_time(decided_at, decode),
        decided_by=decided_by,
        remember=remember,
    )


def grant(row: Row, decode: TimeDecoder) -> Grant:
    gid, owner, cid, tool, scope, key, created, expires, revoked, approval_id, metadata = row
    return Grant(
        id=gid,
        owner=owner,
        conversation_id=cid,
        tool=tool,
        scope=scope,
        key=key,
        created_at=decode(created),
        expires_at=_opt_time(expires, decode),
        revoked_at=_opt_time(revoked, decode),
        approval_id=approval_id,
        metadata=_object(metadata),
    )


def queued_input(row: Row, decode: TimeDecoder) -> QueuedInput:
    """A queued row; its message carries what was queued (role, blocks, hidden, metadata)."""
    qid, position, cid, role, blocks, hidden, metadata, client_id, status, created_at, holder = row
    return QueuedInput(
        id=qid,
        conversation_id=cid,
        message=Message(
            role=role,
            blocks=blocks_from_json(json.loads(blocks)),
            hidden=bool(hidden),
            metadata=_object(metadata),
        ),
        created_at=decode(created_at),
        client_message_id=client_id,
        position=position,
        status=status,
        holder=holder,
    )


def memory(row: Row, decode: TimeDecoder) -> MemoryFact:
    """A ``memories`` row (its integer ``num`` key is the engine's business, not kept)."""
    (
        _num,
        mid,
        scope,
        text,
        subject,
        valid_from,
        valid_to,
        recorded_at,
        supersedes,
        superseded_by,
        cid,
        turn_id,
    ) = row[:12]
    return MemoryFact(
        id=mid,
        scope=scope,
        text=text,
        valid_from=decode(valid_from),
        recorded_at=decode(recorded_at),
        valid_to=_opt_time(valid_to, decode),
        subject=subject,
        supersedes=supersedes,
        superseded_by=superseded_by,
        conversation_id=cid,
        turn_id=turn_id,
    )
