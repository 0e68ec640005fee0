"""The model the crash test's server talks to: a fake OpenAI Chat Completions server
(``tests/fakes/openai_chat.py``) that answers each request from its content instead of
from a script, so it keeps working across server restarts whatever the server asks.

It speaks like the offline model, plus a slow stream:

- the user's last message ``/tool NAME {json}``: a call of tool NAME;
- the user's last message ``/slow N``: N words, one chunk each, ``SLOW_DELAY`` apart;
- a tool result after the model's own call: a short summary of it;
- anything else: a short echo.

The calls a turn makes before the model's first (a memory recall keyed on the message)
are not the model's: after them the user's message is still what is answered.

Every request is still checked against OpenAI's history rules (every tool call answered
by one tool message, in order, before anything else; no result without its call), so a
request the server builds from a repaired history is checked too: ``violations`` lists
each broken rule, and the server got a 400 for it.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # makes `fakes` importable

from fakes.openai_chat import FakeChat, chunk, usage_chunk
from fakes.server import Event, Failure, Stream

SLOW_DELAY = 0.05  # seconds between the chunks of a /slow reply
TOOL_COMMAND = re.compile(r"^\s*/tool\s+([A-Za-z0-9_.\-]+)\s*(.*)$", re.DOTALL)
SLOW_COMMAND = re.compile(r"^\s*/slow\s+(\d+)")
SEEDS = frozenset({"recall", "read_attachment"})  # the calls a turn makes by itself first


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _text_events(words: list[str]) -> list[Event]:
    events: list[Event] = [(None, chunk({"role": "assistant", "content": ""}))]
    events += [(None, chunk({"content": w})) for w in words]
    events.append((None, chunk({}, finish_reason="stop")))
    events.append((None, usage_chunk(10, len(words))))
    events.append((None, "[DONE]"))
    return events


class AnsweringChat(FakeChat):
    """A Chat Completions fake that answers from the request (see the module doc)."""

    def __init__(self) -> None:
        super().__init__()
        self._ids = itertools.count(1)
        self.bad_requests: list[dict[str, Any]] = []

    def respond(self, body: dict[str, Any]) -> Stream:
        messages = body.get("messages") or []
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        since = messages[users[-1] + 1 :] if users else messages
        called = {
            c["function"]["name"]
            for m in since
            if m.get("role") == "assistant"
            for c in m.get("tool_calls") or []
        }
        if called - SEEDS and messages[-1].get("role") == "tool":
            said = " ".join(_text(messages[-1].get("content")).split())[:80]
            return Stream(_text_events(["The ", "tool ", "said: ", said]))
        text = _text(messages[users[-1]].get("content")) if users else ""
        command = TOOL_COMMAND.match(text)
        if command and body.get("tools") and body.get("tool_choice") != "none":
            name, raw = command.group(1), command.group(2)
            arguments = json.loads(raw) if raw.strip() else {}
            call_id = f"call_{next(self._ids)}"
            function = {"name": name, "arguments": json.dumps(arguments)}
            first = {"index": 0, "id": call_id, "type": "function", "function": function}
            events: list[Event] = [
                (None, chunk({"role": "assistant", "content": ""})),
                (None, chunk({"content": f"Calling {name}."})),
                (None, chunk({"tool_calls": [first]})),
                (None, chunk({}, finish_reason="tool_calls")),
                (None, usage_chunk(10, 5)),
                (None, "[DONE]"),
            ]
            return Stream(events)
        slow = SLOW_COMMAND.match(text)
        if slow:
            words = [f"w{i} " for i in range(int(slow.group(1)))]
            return Stream(_text_events(words), delay=SLOW_DELAY)
        return Stream(_text_events(["ok: ", " ".join(text.split())[:60]]))

    async def _handle(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        problems = self.check(body)
        reply: Stream | Failure
        if problems:
            self.violations += problems
            self.bad_requests.append(body)
            reply = self.violation_reply(problems)
        else:
            reply = self.respond(body)
        if isinstance(reply, Failure):
            return JSONResponse(reply.body, status_code=reply.status, headers=reply.headers)
        return StreamingResponse(self._sse(reply, request), media_type="text/event-stream")
