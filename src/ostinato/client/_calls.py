"""What each API operation sends and how its answer is read, with no I/O: ``Client`` and
``AsyncClient`` only carry these out (the way httpx keeps a protocol apart from its
transport), so the two cannot drift apart.

Also here: the typed results (``Conversation``, ``TurnResult``), and ``EventCursor``, the
position a conversation's stream reconnects from.
"""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from ostinato.cli.sse import SSEDecoder
from ostinato.client._errors import api_error
from ostinato.client._frames import UnknownFrame, frame_from_json, message_from_json
from ostinato.frames import ErrorFrame, Frame, MessageCommitted
from ostinato.messages import JSON, Message

T = TypeVar("T")
SSE = {"accept": "text/event-stream"}
FileLike = str | Path | tuple[str, bytes, str]
"""A file to attach: a path, or ``(name, content, media type)``."""


@dataclass(frozen=True, slots=True)
class Conversation:
    id: str
    state: str  # "idle" | "running" | "paused" | "failed"
    created_at: str
    updated_at: str
    owner: str | None = None
    title: str | None = None
    persona: str | None = None
    metadata: JSON = field(default_factory=dict)

    @classmethod
    def of(cls, raw: JSON) -> Conversation:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in raw.items() if k in names})


@dataclass(frozen=True, slots=True)
class TurnResult:
    """A turn's end, as ``POST /turns`` answers without a stream."""

    turn_id: str
    run_id: str
    stop_reason: str
    messages: list[Message]
    metrics: JSON
    error: str | None = None
    queued_position: int | None = None

    @property
    def text(self) -> str:
        """The text of the turn's assistant rows."""
        return "\n\n".join(m.text for m in self.messages if m.role == "assistant" and m.text)

    @classmethod
    def of(cls, raw: JSON) -> TurnResult:
        return cls(
            raw["turn_id"],
            raw["run_id"],
            raw["stop_reason"],
            [message_from_json(m) for m in raw.get("messages", [])],
            raw.get("metrics") or {},
            raw.get("error"),
            raw.get("queued_position"),
        )


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One request, and how its answer becomes the result."""

    method: str
    path: str
    read: Callable[[Any], T]
    json: Any = None
    params: dict[str, Any] | None = None
    data: dict[str, str] | None = None
    files: list[tuple[str, tuple[str, bytes, str]]] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    ok: tuple[int, ...] = (200, 201, 204)

    def result(self, status: int, body: bytes, headers: Any) -> T:
        parsed = json.loads(body) if body else None
        if status not in self.ok:
            raise api_error(status, parsed, headers)
        return self.read(parsed)


def _same(raw: Any) -> Any:
    return raw


def _base(cid: str) -> str:
    return f"/v1/conversations/{cid}"


def create_conversation(title: str | None, metadata: JSON | None) -> Call[Conversation]:
    body = {k: v for k, v in (("title", title), ("metadata", metadata)) if v is not None}
    return Call("POST", "/v1/conversations", Conversation.of, json=body)


def list_conversations(limit: int, before: str | None) -> Call[tuple[list[Conversation], Any]]:
    params: dict[str, Any] = {"limit": limit, **({"before": before} if before else {})}

    def read(raw: JSON) -> tuple[list[Conversation], Any]:
        return [Conversation.of(c) for c in raw["conversations"]], raw.get("next")

    return Call("GET", "/v1/conversations", read, params=params)


def get_conversation(cid: str) -> Call[Conversation]:
    return Call("GET", _base(cid), Conversation.of)


def update_conversation(cid: str, fields: JSON) -> Call[Conversation]:
    return Call("PATCH", _base(cid), Conversation.of, json=fields)


def turns(cid: str) -> Call[list[JSON]]:
    return Call("GET", f"{_base(cid)}/turns", lambda raw: raw["turns"])


def models() -> Call[list[JSON]]:
    return Call("GET", "/v1/models", lambda raw: raw["data"])


def messages(cid: str, after_seq: int, include_hidden: bool) -> Call[list[Message]]:
    params = {"after_seq": after_seq, "include_hidden": str(include_hidden).lower()}

    def read(raw: JSON) -> list[Message]:
        return [message_from_json(m) for m in raw["messages"]]

    return Call("GET", f"{_base(cid)}/messages", read, params=params)


def turn(
    cid: str,
    text: str | None,
    *,
    files: Sequence[FileLike] = (),
    stream: bool = False,
    tool_response: JSON | None = None,
    at: str = "turns",
    **fields: Any,
) -> Call[TurnResult]:
    """``POST /turns``: a message (with files, as a form), or a card's answer. ``at``
    starts it elsewhere: ``messages/{seq}/edit`` (a new version of a message, on a new
    branch)."""
    given = {k: v for k, v in fields.items() if v is not None}
    headers = SSE if stream else {}
    path = f"{_base(cid)}/{at}"
    if tool_response is not None:
        return Call("POST", path, TurnResult.of, json={"tool_response": tool_response, **given})
    if files:
        form = {"text": text or "", **{k: _form(v) for k, v in given.items()}}
        parts = [("files", _file(f)) for f in files]
        return Call("POST", path, TurnResult.of, data=form, files=parts, headers=headers)
    return Call("POST", path, TurnResult.of, json={"text": text, **given}, headers=headers)


def regenerate(cid: str, seq: int, *, stream: bool = False, **fields: Any) -> Call[TurnResult]:
    """``POST .../messages/{seq}/regenerate``: a new answer in place of answer ``seq``."""
    given = {k: v for k, v in fields.items() if v is not None}
    path = f"{_base(cid)}/messages/{seq}/regenerate"
    return Call("POST", path, TurnResult.of, json=given, headers=SSE if stream else {})


def branches(cid: str) -> Call[JSON]:
    return Call("GET", f"{_base(cid)}/branches", _same)


def switch_branch(cid: str, leaf: int) -> Call[JSON]:
    return Call("PUT", f"{_base(cid)}/branch", _same, json={"leaf": leaf})


def _form(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _file(given: FileLike) -> tuple[str, bytes, str]:
    if isinstance(given, tuple):
        return given
    path = Path(given)
    kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return path.name, path.read_bytes(), kind


def cancel(cid: str) -> Call[JSON]:
    return Call("POST", f"{_base(cid)}/cancel", _same)


def approvals(cid: str, pending: bool) -> Call[list[JSON]]:
    params = {"pending": str(pending).lower()}
    return Call("GET", f"{_base(cid)}/approvals", lambda raw: raw["approvals"], params=params)


def decide(
    cid: str, approval_id: str, approve: bool, remember: str, expires_in_s: float | None
) -> Call[JSON]:
    body: JSON = {"decision": "approve" if approve else "decline"}
    if approve and remember != "none":
        body["remember"] = remember
        if expires_in_s is not None:
            body["expires_in_s"] = expires_in_s
    return Call("POST", f"{_base(cid)}/approvals/{approval_id}", _same, json=body)


def memories(query: str | None, limit: int) -> Call[list[JSON]]:
    params: dict[str, Any] = {"limit": limit, **({"q": query} if query else {})}
    return Call("GET", "/v1/memories", lambda raw: raw["memories"], params=params)


def remember(fact: str, subject: str | None) -> Call[JSON]:
    body = {"fact": fact, **({"subject": subject} if subject else {})}
    return Call("POST", "/v1/memories", _same, json=body)


def forget(memory_id: str) -> Call[JSON]:
    return Call("DELETE", f"/v1/memories/{memory_id}", _same)


# --- streams ------------------------------------------------------------------------------


class FrameReader:
    """SSE text in, frames out."""

    def __init__(self) -> None:
        self.decoder = SSEDecoder()

    def feed(self, text: str) -> list[Frame | UnknownFrame]:
        return [
            frame_from_json(json.loads(event.data))
            for event in self.decoder.feed(text)
            if event.data is not None
        ]


class EventCursor:
    """Where a conversation's stream is: the seq of the last row it delivered, from which
    it reconnects (``Last-Event-ID``), so a reconnect misses nothing and repeats nothing.

    Reconnects back off: the n-th in a row without a frame between them waits
    ``BACKOFF_S[n - 1]`` seconds (a server that is restarting gets about 7 s); a
    connection that breaks once they are all waited out ends the stream."""

    RECONNECT = frozenset({"closing", "overflow"})
    BACKOFF_S = (0.25, 0.5, 1.0, 2.0, 4.0)

    def __init__(self, after_seq: int) -> None:
        self.after_seq = after_seq
        self.attempts = 0  # reconnects since the last frame delivered

    def see(self, frame: Frame | UnknownFrame) -> bool:
        """Take a frame; ``False`` when the server ended the stream and asks the client
        to come back (``closing``, ``overflow``)."""
        if isinstance(frame, MessageCommitted):
            self.after_seq = max(self.after_seq, frame.message.seq or 0)
        if isinstance(frame, ErrorFrame) and frame.code in self.RECONNECT:
            return False
        self.attempts = 0
        return True

    @property
    def exhausted(self) -> bool:
        """The stream has waited out every backoff since its last frame: give up."""
        return self.attempts >= len(self.BACKOFF_S)

    def backoff(self) -> float:
        """The seconds to wait before the next reconnect."""
        self.attempts += 1
        return self.BACKOFF_S[min(self.attempts, len(self.BACKOFF_S)) - 1]

    def headers(self) -> dict[str, str]:
        return {**SSE, "last-event-id": str(self.after_seq)}


def events_path(cid: str, deltas: bool) -> tuple[str, dict[str, str]]:
    return f"{_base(cid)}/events", {"deltas": str(deltas).lower()}


def stream_error(status: int, body: bytes, headers: Any) -> Exception:
    return api_error(status, json.loads(body) if body else None, headers)
