"""A fake OpenAI Chat Completions API (``POST /v1/chat/completions``, SSE without names).

Streams are ``chat.completion.chunk`` objects as OpenAI documents them: a role chunk, then
content / tool_call deltas (a call's id and name in its first chunk, the arguments in
pieces), a chunk with ``finish_reason``, a usage chunk with empty ``choices`` (because the
request asks ``stream_options.include_usage``), then ``data: [DONE]``. Compatible servers'
``reasoning_content`` deltas can be added. ``check`` enforces OpenAI's history rules: an
assistant message with ``tool_calls`` must be followed by one ``tool`` message per call
(here also in call order), before any other message, and no ``tool`` message may answer a
call that was not made.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from fakes.server import JSON, Event, Failure, FakeProvider

Events = list[Event]


class FakeChat(FakeProvider):
    path = "/v1/chat/completions"

    def violation_reply(self, problems: list[str]) -> Failure:
        return error(400, "invalid_request_error", problems[0], code=None)

    def check(self, body: JSON) -> list[str]:
        problems: list[str] = []
        if not body.get("stream"):
            problems.append("expected a streaming request")
        if body.get("tool_choice") and not body.get("tools"):
            problems.append("tool_choice is only allowed when tools are specified")
        pending: list[str] = []  # calls of the last assistant message not yet answered
        for i, message in enumerate(body.get("messages") or []):
            role = message.get("role")
            if role not in ("system", "developer", "user", "assistant", "tool"):
                problems.append(f"messages[{i}]: unexpected role {role!r}")
            if role == "tool":
                call_id = message.get("tool_call_id")
                if not pending or call_id != pending[0]:
                    problems.append(
                        f"messages[{i}]: messages with role 'tool' must be a response to a "
                        f"preceding message with 'tool_calls' (in call order); got {call_id!r}"
                    )
                else:
                    pending.pop(0)
                if not isinstance(message.get("content"), str):
                    problems.append(f"messages[{i}]: tool message content must be a string")
                continue
            if pending:
                problems.append(
                    "An assistant message with 'tool_calls' must be followed by tool messages "
                    f"responding to each 'tool_call_id'. Missing: {pending}"
                )
                pending = []
            if role == "assistant":
                pending = [c["id"] for c in message.get("tool_calls") or []]
                if len(set(pending)) != len(pending):
                    problems.append(f"messages[{i}]: duplicate tool call ids")
        if pending:
            problems.append(f"tool calls {pending} were not answered")
        return problems


def chunk_events(
    text: str = "",
    *,
    calls: list[tuple[str, str, JSON]] | None = None,
    reasoning: str = "",
    finish: str | None = None,
    truncate_last_call: bool = False,
    final: bool = True,
    extra: Sequence[Event] = (),
) -> Events:
    """The SSE data lines of one streamed completion."""
    calls = calls or []
    events: Events = [(None, chunk({"role": "assistant", "content": ""}))]
    events += extra
    if reasoning:
        events += [(None, chunk({"reasoning_content": p})) for p in _halves(reasoning)]
    events += [(None, chunk({"content": p})) for p in _halves(text)]
    for index, (call_id, name, arguments) in enumerate(calls):
        raw = json.dumps(arguments)
        cut = truncate_last_call and index == len(calls) - 1
        pieces = [raw[: len(raw) // 2]] if cut else _halves(raw)
        function = {"name": name, "arguments": ""}
        first = {"index": index, "id": call_id, "type": "function", "function": function}
        events.append((None, chunk({"tool_calls": [first]})))
        for piece in pieces:
            delta = {"index": index, "function": {"arguments": piece}}
            events.append((None, chunk({"tool_calls": [delta]})))
    if final:
        reason = finish or ("tool_calls" if calls else "stop")
        events.append((None, chunk({}, finish_reason=reason)))
        events.append((None, usage_chunk(15, 9)))
        events.append((None, "[DONE]"))
    return events


def chunk(delta: JSON, finish_reason: str | None = None) -> JSON:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": "fake-model",
        "system_fingerprint": None,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }


def usage_chunk(prompt: int, completion: int) -> JSON:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": "fake-model",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": 4},
        },
    }


def error(
    status: int, kind: str, message: str, *, code: str | None, headers: dict[str, str] | None = None
) -> Failure:
    """OpenAI's error reply (the Chat Completions and Responses APIs share it)."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return Failure(status, body, headers or {})


def stream_error(kind: str, message: str, code: str | None) -> Event:
    """An error object sent as a data line inside a stream."""
    return (None, {"error": {"message": message, "type": kind, "param": None, "code": code}})


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [p for p in (text[:middle], text[middle:]) if p]
