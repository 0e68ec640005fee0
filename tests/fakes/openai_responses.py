"""A fake OpenAI Responses API (``POST /v1/responses``, SSE with ``event:`` lines).

Streams follow the documented event flow: response.created, response.in_progress, per
output item response.output_item.added, its deltas (output_text, reasoning summary,
function_call_arguments), response.output_item.done, then response.completed (or
response.incomplete), every event with a ``sequence_number``. ``check`` enforces the
API's history rules: every ``function_call`` answered by exactly one
``function_call_output`` with its ``call_id``, no output without its call, and with
``store: false`` no item ids (the real API answers "Item with id ... not found") and no
reasoning item without its encrypted content.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from fakes.openai_chat import error
from fakes.server import JSON, Event, Failure, FakeProvider

Events = list[Event]


class FakeResponses(FakeProvider):
    path = "/v1/responses"

    def violation_reply(self, problems: list[str]) -> Failure:
        return error(400, "invalid_request_error", problems[0], code=None)

    def check(self, body: JSON) -> list[str]:
        problems: list[str] = []
        if not body.get("stream"):
            problems.append("expected a streaming request")
        stored = body.get("store", True)
        calls: dict[str, int] = {}  # call_id -> times answered
        for i, item in enumerate(body.get("input") or []):
            kind = item.get("type", "message")
            if not stored and "id" in item:
                problems.append(
                    f"Item with id {item['id']!r} not found. Items are not persisted when "
                    "`store` is set to false."
                )
            if kind == "reasoning" and not stored and not item.get("encrypted_content"):
                problems.append(f"input[{i}]: reasoning item without encrypted_content")
            if kind == "function_call":
                if item["call_id"] in calls:
                    problems.append(f"input[{i}]: duplicate call_id {item['call_id']!r}")
                calls[item["call_id"]] = 0
            elif kind == "function_call_output":
                call_id = item.get("call_id")
                if call_id not in calls:
                    problems.append(
                        f"No tool call found for function call output with call_id {call_id}."
                    )
                else:
                    calls[call_id] += 1
                    if calls[call_id] > 1:
                        problems.append(f"input[{i}]: call {call_id!r} answered twice")
        for call_id, answers in calls.items():
            if answers == 0:
                problems.append(f"No tool output found for function call {call_id}.")
        return problems


def message(text: str, item_id: str = "msg_fake") -> JSON:
    return {"type": "message", "id": item_id, "text": text}


def call(call_id: str, name: str, arguments: JSON, item_id: str | None = None) -> JSON:
    return {
        "type": "function_call",
        "id": item_id or f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(arguments),
    }


def reasoning(summary: str, encrypted: str, item_id: str = "rs_fake") -> JSON:
    return {"type": "reasoning", "id": item_id, "summary": summary, "encrypted_content": encrypted}


def response_events(
    items: list[JSON],
    *,
    incomplete: str | None = None,
    truncate_last_call: bool = False,
    final: bool = True,
    extra: Sequence[Event] = (),
    failed: JSON | None = None,
) -> Events:
    seq = _Sequence()
    events: Events = [
        seq.event("response.created", response=_response("in_progress", [])),
        seq.event("response.in_progress", response=_response("in_progress", [])),
    ]
    events += extra
    done: list[JSON] = []
    for index, item in enumerate(items):
        cut = truncate_last_call and index == len(items) - 1
        item_events, finished = _item_events(seq, index, item, cut)
        events += item_events
        if finished is not None:
            done.append(finished)
    if failed is not None:
        response = _response("failed", done) | {"error": failed}
        events.append(seq.event("response.failed", response=response))
    elif incomplete is not None:
        response = _response("incomplete", done) | {"incomplete_details": {"reason": incomplete}}
        events.append(seq.event("response.incomplete", response=response))
    elif final:
        events.append(seq.event("response.completed", response=_response("completed", done)))
    return events


def _item_events(seq: _Sequence, index: int, item: JSON, cut: bool) -> tuple[Events, JSON | None]:
    kind, item_id = item["type"], item["id"]
    at = {"item_id": item_id, "output_index": index}
    if kind == "message":
        part = {"type": "output_text", "text": item["text"], "annotations": []}
        final = {
            "type": "message",
            "id": item_id,
            "status": "completed",
            "role": "assistant",
            "content": [part],
        }
        start = final | {"status": "in_progress", "content": []}
        body = [
            seq.event(
                "response.content_part.added", **at, content_index=0, part=part | {"text": ""}
            ),
            *(
                seq.event("response.output_text.delta", **at, content_index=0, delta=p, logprobs=[])
                for p in _halves(item["text"])
            ),
            seq.event(
                "response.output_text.done", **at, content_index=0, text=item["text"], logprobs=[]
            ),
            seq.event("response.content_part.done", **at, content_index=0, part=part),
        ]
    elif kind == "reasoning":
        summary = {"type": "summary_text", "text": item["summary"]}
        final = {
            "type": "reasoning",
            "id": item_id,
            "summary": [summary],
            "encrypted_content": item["encrypted_content"],
        }
        start = {"type": "reasoning", "id": item_id, "summary": []}
        body = [
            seq.event(
                "response.reasoning_summary_part.added",
                **at,
                summary_index=0,
                part=summary | {"text": ""},
            ),
            *(
                seq.event("response.reasoning_summary_text.delta", **at, summary_index=0, delta=p)
                for p in _halves(item["summary"])
            ),
            seq.event(
                "response.reasoning_summary_text.done", **at, summary_index=0, text=item["summary"]
            ),
            seq.event("response.reasoning_summary_part.done", **at, summary_index=0, part=summary),
        ]
    else:
        final = item | {"status": "completed"}
        start = item | {"status": "in_progress", "arguments": ""}
        raw = item["arguments"]
        pieces = [raw[: len(raw) // 2]] if cut else _halves(raw)
        body = [seq.event("response.function_call_arguments.delta", **at, delta=p) for p in pieces]
        if not cut:
            body.append(seq.event("response.function_call_arguments.done", **at, arguments=raw))
    events = [seq.event("response.output_item.added", output_index=index, item=start), *body]
    if cut:
        return events, None
    events.append(seq.event("response.output_item.done", output_index=index, item=final))
    return events, final


class _Sequence:
    def __init__(self) -> None:
        self.number = 0

    def event(self, name: str, **fields: Any) -> Event:
        self.number += 1
        return (name, {"type": name, "sequence_number": self.number, **fields})


def stream_error(code: str, message: str) -> Event:
    """An ``error`` event inside a stream."""
    return (
        "error",
        {"type": "error", "code": code, "message": message, "param": None, "sequence_number": 99},
    )


def _response(status: str, output: list[JSON]) -> JSON:
    usage = None
    if status != "in_progress":
        usage = {
            "input_tokens": 20,
            "input_tokens_details": {"cached_tokens": 5},
            "output_tokens": 11,
            "output_tokens_details": {"reasoning_tokens": 3},
            "total_tokens": 31,
        }
    return {
        "id": "resp_fake",
        "object": "response",
        "created_at": 1767225600,
        "status": status,
        "model": "fake-model",
        "output": output,
        "incomplete_details": None,
        "error": None,
        "usage": usage,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [p for p in (text[:middle], text[middle:]) if p]
