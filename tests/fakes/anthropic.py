"""A fake Anthropic Messages API (``POST /v1/messages``, SSE with ``event:`` lines).

Streams follow Anthropic's documented event flow: message_start, ping, per block
content_block_start / content_block_delta... / content_block_stop, message_delta (stop
reason and cumulative usage), message_stop. ``check`` enforces the history rules the
real API enforces: user first, strict alternation, every tool_use answered in the very
next user message with tool_result blocks that come first, no orphan or duplicate
results, signed thinking, non-empty text, tools defined whenever tool blocks appear.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from fakes.server import JSON, Event, Failure, FakeProvider


class FakeAnthropic(FakeProvider):
    path = "/v1/messages"

    def violation_reply(self, problems: list[str]) -> Failure:
        return error(400, "invalid_request_error", problems[0])

    def check(self, body: JSON) -> list[str]:
        problems: list[str] = []
        if not body.get("stream"):
            problems.append("expected a streaming request")
        if not isinstance(body.get("max_tokens"), int):
            problems.append("max_tokens is required")
        messages = body.get("messages") or []
        if not messages or messages[0].get("role") != "user":
            problems.append("the first message must use the user role")
        uses_tools = False
        expected: list[str] = []  # tool_use ids the next user message must answer
        for i, message in enumerate(messages):
            role, content = message.get("role"), message.get("content")
            if role not in ("user", "assistant"):
                problems.append(f"messages.{i}: unexpected role {role!r}")
            if i and messages[i - 1].get("role") == role:
                problems.append(f"messages.{i}: roles must alternate between user and assistant")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if not blocks:
                problems.append(f"messages.{i}: content must be non-empty")
                continue
            problems += _check_blocks(i, blocks)
            uses_tools |= any(b["type"] in ("tool_use", "tool_result") for b in blocks)
            if role == "user":
                problems += _check_results(i, blocks, expected)
                expected = []
            else:
                if expected:
                    problems.append(f"messages.{i}: tool_use ids {expected} were not answered")
                expected = [b["id"] for b in blocks if b["type"] == "tool_use"]
        if expected:
            problems.append(f"tool_use ids {expected} have no tool_result after them")
        if uses_tools and not body.get("tools"):
            problems.append("requests with tool_use or tool_result blocks must define tools")
        return problems


def _check_blocks(i: int, blocks: list[JSON]) -> list[str]:
    problems = []
    for block in blocks:
        if block.get("type") == "text" and not block.get("text"):
            problems.append(f"messages.{i}: text content blocks must be non-empty")
        if block.get("type") == "thinking" and not block.get("signature"):
            problems.append(f"messages.{i}: thinking blocks need their signature")
    return problems


def _check_results(i: int, blocks: list[JSON], expected: list[str]) -> list[str]:
    problems = []
    kinds = [b["type"] for b in blocks]
    results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
    if kinds[: len(results)] != ["tool_result"] * len(results):
        problems.append(f"messages.{i}: tool_result blocks must come first in the content")
    for tool_use_id in results:
        if tool_use_id not in expected:
            problems.append(
                f"messages.{i}: unexpected tool_use_id {tool_use_id!r} in tool_result blocks; "
                "each tool_result must have a corresponding tool_use in the previous message"
            )
    if len(set(results)) != len(results):
        problems.append(f"messages.{i}: a tool_use_id is answered more than once")
    missing = [x for x in expected if x not in results]
    if missing:
        problems.append(
            f"messages.{i}: tool_use ids were found without tool_result blocks "
            f"immediately after: {missing}"
        )
    return problems


def error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> Failure:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return Failure(status, body, headers or {})


def stream_error(kind: str, message: str) -> Event:
    """An ``error`` event inside a stream."""
    return ("error", {"type": "error", "error": {"type": kind, "message": message}})


def message_events(
    blocks: list[JSON],
    stop_reason: str = "end_turn",
    *,
    usage: tuple[int, int] = (12, 7),
    truncate_last_tool: bool = False,
    final: bool = True,
    extra: Sequence[Event] = (),
) -> list[Event]:
    """The SSE events of one Messages response holding ``blocks`` (API-shaped blocks)."""
    events: list[Event] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-fake",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": usage[0],
                        "output_tokens": 1,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 3,
                    },
                },
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    events += extra
    for index, block in enumerate(blocks):
        cut = truncate_last_tool and index == len(blocks) - 1
        events += _block_events(index, block, cut)
    if final:
        delta = {"stop_reason": stop_reason, "stop_sequence": None}
        usage_out = {"output_tokens": usage[1]}
        events.append(
            ("message_delta", {"type": "message_delta", "delta": delta, "usage": usage_out})
        )
        events.append(("message_stop", {"type": "message_stop"}))
    return events


def _block_events(index: int, block: JSON, cut: bool) -> list[Event]:
    kind = block["type"]
    deltas: list[JSON] = []
    if kind == "text":
        start: JSON = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": piece} for piece in _halves(block["text"])]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _halves(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "tool_use":
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        raw = json.dumps(block["input"])
        pieces = [raw[: len(raw) // 2]] if cut else _halves(raw)
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
    else:
        start = block
    events: list[Event] = [
        (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
    ]
    for delta in deltas:
        events.append(
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        )
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [p for p in (text[:middle], text[middle:]) if p]
