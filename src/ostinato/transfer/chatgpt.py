"""ChatGPT's ``conversations.json`` (its "Export data" archive) as an export document.

The file is a list of conversations; each holds its messages as a tree: ``mapping`` from
a node id to ``{"message", "parent", "children"}``, and ``current_node``, the last node of
the branch on screen. A message has ``author.role``, ``create_time`` (Unix seconds) and
``content`` (``content_type`` ``text`` or ``multimodal_text`` with ``parts``, ``code``
with ``text``). (The format as public parsers of it describe it, e.g.
mitkury/chatgpt-export-parser's docs/chatgpt-data-export-format.md.)

The person's and the assistant's messages with text are kept, in the same tree: a node
that is left out (an empty root, a system or tool message, the model's hidden thinking or
browsing, an image without text) passes its children to its nearest kept ancestor. Rows
are numbered depth first, so a row's parent always comes before it, and each branch keeps
the order ChatGPT lists its children in. The conversation is on the branch of
``current_node``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ostinato.store.base import utcnow
from ostinato.transfer.document import FORMAT, VERSION, ImportRefused


def _time(value: Any) -> str | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        try:
            return datetime.fromtimestamp(value, UTC).isoformat()
        except (OverflowError, OSError, ValueError):
            return None
    return None


def node_text(message: Any) -> tuple[str, str] | None:
    """(role, text) of a node's message worth keeping, else None."""
    if not isinstance(message, dict):
        return None
    role = (message.get("author") or {}).get("role")
    if role not in ("user", "assistant"):
        return None
    if (message.get("metadata") or {}).get("is_visually_hidden_from_conversation"):
        return None
    content = message.get("content") or {}
    kind = content.get("content_type")
    if kind in ("text", "multimodal_text"):
        parts = content.get("parts") or []
        text = "\n".join(p for p in parts if isinstance(p, str) and p)
    elif kind == "code" and isinstance(content.get("text"), str):
        text = f"```\n{content['text']}\n```"
    else:
        return None
    return (role, text) if text.strip() else None


def _conversation(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict) or not isinstance(raw.get("mapping"), dict):
        raise ImportRefused(f"{where}.mapping: a ChatGPT conversation has a mapping of its nodes")
    mapping: dict[str, Any] = raw["mapping"]
    roots = [k for k, node in mapping.items() if (node or {}).get("parent") not in mapping]
    seq_of: dict[str, int] = {}
    rows: list[dict[str, Any]] = []
    stack: list[tuple[str, int]] = [(root, 0) for root in reversed(roots)]
    while stack:
        node_id, parent = stack.pop()
        if node_id in seq_of or node_id not in mapping:
            continue  # a node reached twice (a broken file) is kept once
        node = mapping[node_id] or {}
        kept = node_text(node.get("message"))
        if kept is not None:
            role, text = kept
            rows.append(
                {
                    "seq": len(rows) + 1,
                    "parent_seq": parent,
                    "role": role,
                    "blocks": [{"type": "text", "text": text}],
                    "created_at": _time((node.get("message") or {}).get("create_time")),
                }
            )
            parent = len(rows)
        seq_of[node_id] = parent
        children = [c for c in node.get("children") or [] if isinstance(c, str)]
        stack.extend((child, parent) for child in reversed(children))
    now = utcnow().isoformat()
    title = raw.get("title")
    return {
        "id": str(raw.get("conversation_id") or raw.get("id") or where),
        "title": title[:200] if isinstance(title, str) and title.strip() else None,
        "metadata": {"imported_from": "chatgpt"},
        "created_at": _time(raw.get("create_time")) or now,
        "updated_at": _time(raw.get("update_time")) or now,
        "branch_tip": seq_of.get(str(raw.get("current_node")), len(rows)),
        "messages": rows,
    }


def from_chatgpt(data: list[Any]) -> dict[str, Any]:
    """The export document of a ChatGPT ``conversations.json``; ``ImportRefused`` for a
    list that is not one."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "conversations": [_conversation(raw, f"[{i}]") for i, raw in enumerate(data)],
    }
