"""Request bodies as the JSON bytes an adapter sends, each tool's part encoded once.

A model request carries every tool's definition, and they are the same from one call to
the next (a tool holds its schema, and the catalog a turn offers hands out that same
object each turn), while encoding them is most of the work of encoding a body: a
catalog of a few dozen tools is some 20 KB of small objects. ``request_body`` encodes
the rest of the body on every call and splices in each tool's part as it was encoded
the first time.

A part is kept by the adapter's wire function, the tool's name and description and the
identity of its schema object (holding the object, so its id is not reused while kept):
a tool made again with a new schema object is encoded anew. Nothing here changes a
schema in place after its tool is made; a schema that were changed so would be sent as
first encoded until its tool is made again.

The bytes are what the SDKs' own encoding gives (UTF-8, no ASCII escaping, no spaces, no
NaN), with ``tools`` the last key.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ostinato.messages import JSON
from ostinato.models.base import ToolDefinition

ToolWire = Callable[[ToolDefinition], JSON]
"""An adapter's wire form of one tool definition (a module-level function)."""

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_KEPT_MAX = 4096  # parts kept; past it they are encoded again as they come
_kept: dict[tuple[ToolWire, str, str, int], tuple[Any, bytes]] = {}


def encode(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON (as the SDKs encode a body)."""
    return _ENCODER.encode(value).encode()


def tool_part(tool: ToolDefinition, wire: ToolWire) -> bytes:
    """``wire(tool)`` encoded, from what was kept when it is the same definition."""
    key = (wire, tool.name, tool.description, id(tool.parameters))
    kept = _kept.get(key)
    if kept is not None and kept[0] is tool.parameters:
        return kept[1]
    part = encode(wire(tool))
    if len(_kept) >= _KEPT_MAX:
        _kept.clear()
    _kept[key] = (tool.parameters, part)
    return part


def request_body(params: JSON, tools: Sequence[ToolDefinition], wire: ToolWire) -> bytes:
    """``params`` as JSON bytes with ``tools`` (``wire`` of each, in order) as its
    ``tools`` key, whatever ``params["tools"]`` holds; no key when there are none."""
    rest = encode({key: value for key, value in params.items() if key != "tools"})
    if not tools:
        return rest
    parts = b",".join(tool_part(tool, wire) for tool in tools)
    comma = b"," if len(rest) > 2 else b""
    return b'%s%s"tools":[%s]}' % (rest[:-1], comma, parts)
