"""The canonical message format: messages made of content blocks.

Every part of ostinato speaks this format. Provider adapters translate to and from it at
the edge (``ostinato.models``), the store keeps it as JSON, the HTTP API sends it as JSON.

On the wire a block is a JSON object with a ``type``::

    {"type": "text", "text": "..."}
    {"type": "thinking", "text": "...", "signature": "..."}
    {"type": "tool_use", "id": "...", "name": "...", "input": {...}}
    {"type": "tool_result", "tool_use_id": "...", "content": "..." | [blocks], "is_error": false}
    {"type": "image", "media_type": "image/png", "data": "<base64>"}   (or "url" instead of "data")
    {"type": "file", "media_type": "application/pdf", "url": "...", "name": "a.pdf"}

``provider_data`` (on text, thinking and tool_use) carries what one provider needs to get
back verbatim on the next call (an item id, an encrypted reasoning payload); nothing but
that provider's adapter reads it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeAlias

Role: TypeAlias = Literal["user", "assistant", "tool", "system"]
ROLES: frozenset[str] = frozenset({"user", "assistant", "tool", "system"})
JSON: TypeAlias = dict[str, Any]


@dataclass(frozen=True, slots=True)
class TextBlock:
    text: str
    provider_data: JSON | None = None
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    text: str
    signature: str | None = None
    provider_data: JSON | None = None
    type: Literal["thinking"] = "thinking"


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    id: str
    name: str
    input: JSON
    provider_data: JSON | None = None
    type: Literal["tool_use"] = "tool_use"


@dataclass(frozen=True, slots=True)
class ImageBlock:
    media_type: str
    data: str | None = None
    url: str | None = None
    type: Literal["image"] = "image"


@dataclass(frozen=True, slots=True)
class FileBlock:
    media_type: str
    data: str | None = None
    url: str | None = None
    name: str | None = None
    type: Literal["file"] = "file"


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    tool_use_id: str
    content: str | tuple[TextBlock | ImageBlock, ...]
    is_error: bool = False
    type: Literal["tool_result"] = "tool_result"

    @property
    def text(self) -> str:
        """The result as plain text (image parts are left out)."""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content if isinstance(part, TextBlock))


Block: TypeAlias = (
    TextBlock | ThinkingBlock | ToolUseBlock | ToolResultBlock | ImageBlock | FileBlock
)


@dataclass(frozen=True, slots=True)
class Message:
    """One message. ``seq``, ``id``, ``turn_id``, ``created_at`` and ``parent_seq`` are set
    once stored: ``parent_seq`` is the seq of the row it follows in the conversation's tree
    (0 for a first row; ``ostinato.store.tree``)."""

    role: Role
    blocks: tuple[Block, ...]
    hidden: bool = False
    metadata: JSON = field(default_factory=dict)
    seq: int | None = None
    id: str | None = None
    turn_id: str | None = None
    created_at: datetime | None = None
    parent_seq: int | None = None

    @property
    def text(self) -> str:
        """The concatenated text blocks."""
        return "".join(b.text for b in self.blocks if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.blocks if isinstance(b, ToolUseBlock)]

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        return [b for b in self.blocks if isinstance(b, ToolResultBlock)]


def user_text(text: str, **metadata: Any) -> Message:
    """A user message holding one text block."""
    return Message(role="user", blocks=(TextBlock(text),), metadata=dict(metadata))


# --- serialisation -------------------------------------------------------------------
# One hand-written mapping both ways: it runs on every stored row, so it stays simple and
# fast, and it validates what it reads so a malformed block is a clear ValueError.


def block_to_json(block: Block) -> JSON:
    match block:
        case TextBlock(text=text, provider_data=pd):
            out: JSON = {"type": "text", "text": text}
        case ThinkingBlock(text=text, signature=sig, provider_data=pd):
            out = {"type": "thinking", "text": text, "signature": sig}
        case ToolUseBlock(id=id_, name=name, input=input_, provider_data=pd):
            out = {"type": "tool_use", "id": id_, "name": name, "input": input_}
        case ToolResultBlock(tool_use_id=tid, content=content, is_error=is_error):
            body: str | list[JSON] = (
                content if isinstance(content, str) else [block_to_json(p) for p in content]
            )
            return {
                "type": "tool_result",
                "tool_use_id": tid,
                "content": body,
                "is_error": is_error,
            }
        case ImageBlock(media_type=mt, data=data, url=url):
            return _drop_none({"type": "image", "media_type": mt, "data": data, "url": url})
        case FileBlock(media_type=mt, data=data, url=url, name=name):
            return _drop_none(
                {"type": "file", "media_type": mt, "data": data, "url": url, "name": name}
            )
    if pd is not None:
        out["provider_data"] = pd
    return out


def blocks_to_json(blocks: Iterable[Block]) -> list[JSON]:
    return [block_to_json(b) for b in blocks]


def block_from_json(raw: Any) -> Block:
    """Read one block; raises ``ValueError`` saying what is wrong."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"a block must be a JSON object, got {type(raw).__name__}")
    kind = raw.get("type")
    pd = raw.get("provider_data")
    if pd is not None and not isinstance(pd, dict):
        raise ValueError("provider_data must be an object")
    if kind == "text":
        return TextBlock(_str(raw, "text"), provider_data=pd)
    if kind == "thinking":
        return ThinkingBlock(
            _str(raw, "text"), signature=_opt_str(raw, "signature"), provider_data=pd
        )
    if kind == "tool_use":
        tool_input = raw.get("input", {})
        if not isinstance(tool_input, dict):
            raise ValueError("tool_use.input must be an object")
        return ToolUseBlock(_str(raw, "id"), _str(raw, "name"), tool_input, provider_data=pd)
    if kind == "tool_result":
        return _tool_result_block(raw)
    if kind in ("image", "file"):
        return _media_block(raw)
    raise ValueError(f"unknown block type {kind!r}")


def _tool_result_block(raw: Mapping[str, Any]) -> ToolResultBlock:
    content = raw.get("content", "")
    parsed: str | tuple[TextBlock | ImageBlock, ...]
    if isinstance(content, str):
        parsed = content
    elif isinstance(content, list):
        parts = tuple(block_from_json(p) for p in content)
        for part in parts:
            if not isinstance(part, TextBlock | ImageBlock):
                raise ValueError("tool_result.content may hold only text and image blocks")
        parsed = parts  # type: ignore[assignment]
    else:
        raise ValueError("tool_result.content must be a string or a list of blocks")
    return ToolResultBlock(
        _str(raw, "tool_use_id"), parsed, is_error=bool(raw.get("is_error", False))
    )


def _media_block(raw: Mapping[str, Any]) -> ImageBlock | FileBlock:
    media_type = _str(raw, "media_type")
    data, url = _opt_str(raw, "data"), _opt_str(raw, "url")
    if (data is None) == (url is None):
        raise ValueError(f"{raw['type']} block needs exactly one of 'data' or 'url'")
    if raw["type"] == "image":
        return ImageBlock(media_type, data=data, url=url)
    return FileBlock(media_type, data=data, url=url, name=_opt_str(raw, "name"))


def blocks_from_json(raw: Any) -> tuple[Block, ...]:
    if not isinstance(raw, list):
        raise ValueError("blocks must be a JSON array")
    return tuple(block_from_json(b) for b in raw)


def message_to_json(message: Message) -> JSON:
    """The public JSON shape of a message (as the API and frames carry it)."""
    return {
        "id": message.id,
        "seq": message.seq,
        "role": message.role,
        "blocks": blocks_to_json(message.blocks),
        "hidden": message.hidden,
        "metadata": message.metadata,
        "turn_id": message.turn_id,
        "created_at": message.created_at.isoformat() if message.created_at else None,
        "parent_seq": message.parent_seq,
        "siblings": None,  # the versions where a branch forks: set by ``/messages`` only
    }


# ``json.dumps(value, ensure_ascii=False, default=str)``'s encoder, made once (``dumps``
# makes one per call when given options): a tool's result is encoded every step
_RESULT_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


def tool_result_content(value: Any) -> str:
    """How a tool's return value is shown to the model."""
    if isinstance(value, str):
        return value
    if value is None:
        return "done"
    return _RESULT_ENCODER.encode(value)


def unanswered_tool_uses(messages: Sequence[Message]) -> list[ToolUseBlock]:
    """tool_use blocks in ``messages`` that no later tool_result answers."""
    answered = {r.tool_use_id for m in messages for r in m.tool_results}
    return [u for m in messages for u in m.tool_uses if u.id not in answered]


def _str(raw: Mapping[str, Any], key: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{raw.get('type')} block needs a string {key!r}")
    return value


def _opt_str(raw: Mapping[str, Any], key: str) -> str | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{raw.get('type')}.{key} must be a string")
    return value


def _drop_none(d: JSON) -> JSON:
    return {k: v for k, v in d.items() if v is not None}
