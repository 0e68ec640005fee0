"""Frames and rows from their JSON, as the server sends them: the same dataclasses the
server emits (``ostinato.frames``, ``ostinato.messages``), so a client needs no second
model of them. An unknown frame type (a newer server) comes back as ``UnknownFrame``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, get_args

from ostinato.frames import Frame
from ostinato.messages import JSON, Message, blocks_from_json


@dataclass(frozen=True, slots=True)
class UnknownFrame:
    """A frame this version of the client does not know (the server is newer)."""

    type: str
    run_id: str
    seq: int
    data: JSON = field(default_factory=dict)


FRAME_CLASSES: dict[str, type[Any]] = {
    cls.__dataclass_fields__["type"].default: cls for cls in get_args(Frame)
}


def message_from_json(raw: JSON) -> Message:
    """A row as ``/messages`` and ``message`` frames carry it."""
    created = raw.get("created_at")
    return Message(
        role=raw["role"],
        blocks=blocks_from_json(raw.get("blocks", [])),
        hidden=bool(raw.get("hidden", False)),
        metadata=dict(raw.get("metadata") or {}),
        seq=raw.get("seq"),
        id=raw.get("id"),
        turn_id=raw.get("turn_id"),
        created_at=datetime.fromisoformat(created) if isinstance(created, str) else None,
    )


def frame_from_json(raw: JSON) -> Frame | UnknownFrame:
    """One frame from its JSON (an SSE ``data:`` line, a WebSocket message)."""
    kind = str(raw.get("type", ""))
    cls = FRAME_CLASSES.get(kind)
    if cls is None:
        return UnknownFrame(kind, str(raw.get("run_id", "")), int(raw.get("seq", 0)), raw)
    names = {f.name for f in dataclasses.fields(cls)}
    values = {k: v for k, v in raw.items() if k in names}
    if "message" in values and isinstance(values["message"], dict):
        values["message"] = message_from_json(values["message"])
    frame: Frame = cls(**values)
    return frame
