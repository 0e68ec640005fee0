"""The model the browser tests' server talks to: the crash test's answering fake
(``tests/e2e/fake_model.py``: ``/tool NAME {json}`` calls a tool, ``/slow N`` streams N
words slowly, a tool result is summarised), plus:

- ``/say TEXT``: replies TEXT exactly (a hostile Markdown reply, say), in a few chunks;
- ``/busy TEXT``: the first request answers 429 (the server retries, with a
  ``model.retrying`` frame), the next replies TEXT;
- ``/think TEXT``: streams a thought first (``reasoning_content``), then replies TEXT;
- ``/fail``: answers 400, which no retry mends: the turn fails with the error;
- ``/count``: replies "answer N", N counting such answers (so a regenerated answer
  differs from the one it replaces);
- ``/loop``: calls ``calculator`` again (a new sum each time) after every result, until
  the turn's budget of model calls runs out; the wrap-up call (tools off) gets a sentence;
- ``/steps N``: calls ``calculator`` N times, one call a step, each step's reply streamed
  slowly (about a second), then replies "steps done": a turn with step boundaries a
  person can steer into (a message steered in is the newest user text: ``/say`` answers).
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.e2e.fake_model import SEEDS, AnsweringChat, Failure, Stream, _text, _text_events
from tests.fakes.openai_chat import chunk, usage_chunk

SAY = re.compile(r"^\s*/say\s(.*)$", re.DOTALL)
BUSY = re.compile(r"^\s*/busy\s(.*)$", re.DOTALL)
THINK = re.compile(r"^\s*/think\s(.*)$", re.DOTALL)
STEPS = re.compile(r"^\s*/steps\s+(\d+)\s*$")
STEP_DELAY = 0.25  # seconds between the chunks of a /steps call
WRAP_UP = "Out of steps: this is where I stopped."


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _thinking(thought: str, text: str) -> Stream:
    events: Any = [(None, chunk({"role": "assistant", "content": ""}))]
    events += [(None, chunk({"reasoning_content": p})) for p in _pieces(thought)]
    events += _text_events(_pieces(text))[1:]
    return Stream(events)


def _sum_call(n: int, delay: float = 0.0) -> Stream:
    call_id = f"loop_{n}"  # each call differs, so the repetition backstop lets it go on
    function = {"name": "calculator", "arguments": json.dumps({"expression": f"{n}+1"})}
    first = {"index": 0, "id": call_id, "type": "function", "function": function}
    return Stream(
        [
            (None, chunk({"role": "assistant", "content": ""})),
            (None, chunk({"tool_calls": [first]})),
            (None, chunk({}, finish_reason="tool_calls")),
            (None, usage_chunk(10, 5)),
            (None, "[DONE]"),
        ],
        delay=delay,
    )


class PageChat(AnsweringChat):
    def __init__(self) -> None:
        super().__init__()
        self.busy_refused: set[str] = set()
        self.loops = 0
        self.counted = 0

    def respond(self, body: dict[str, Any]) -> Stream | Failure:  # type: ignore[override]
        messages = body.get("messages") or []
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        text = _text(messages[users[-1]].get("content")) if users else ""
        since = messages[users[-1] + 1 :] if users else []
        called = {
            c["function"]["name"]
            for m in since
            if m.get("role") == "assistant"
            for c in m.get("tool_calls") or []
        }
        last_is_user = not called - SEEDS  # only the turn's own seed calls so far
        said = SAY.match(text)
        if said and last_is_user:
            return Stream(_text_events(_pieces(said.group(1))))
        if text.strip() == "/count" and last_is_user:
            self.counted += 1
            return Stream(_text_events([f"answer {self.counted}"]))
        steps = STEPS.match(text)
        if steps:
            done = sum(1 for m in since if m.get("role") == "tool")
            if done < int(steps.group(1)) and body.get("tool_choice") != "none":
                self.loops += 1
                return _sum_call(self.loops, STEP_DELAY)
            return Stream(_text_events(["steps ", "done"]))
        if text.strip() == "/loop":
            if body.get("tools") and body.get("tool_choice") != "none":
                self.loops += 1
                return _sum_call(self.loops)
            return Stream(_text_events(_pieces(WRAP_UP)))
        if text.strip() == "/fail" and last_is_user:
            error = {"error": {"type": "invalid_request_error", "message": "the fake refuses"}}
            return Failure(400, error)
        thought = THINK.match(text)
        if thought and last_is_user:
            return _thinking(f"Thinking about {thought.group(1)}", thought.group(1))
        busy = BUSY.match(text)
        if busy and last_is_user:
            if text not in self.busy_refused:
                self.busy_refused.add(text)
                error = {"error": {"type": "rate_limit_error", "message": "busy, try later"}}
                return Failure(429, error, {"retry-after": "1"})
            return Stream(_text_events(_pieces(busy.group(1))))
        return super().respond(body)
