"""The model the browser tests' server talks to: the crash test's answering fake
(``tests/e2e/fake_model.py``: ``/tool NAME {json}`` calls a tool, ``/slow N`` streams N
words slowly, a tool result is summarised), plus:

- ``/say TEXT``: replies TEXT exactly (a hostile Markdown reply, say), in a few chunks;
- ``/busy TEXT``: the first request answers 429 (the server retries, with a
  ``model.retrying`` frame), the next replies TEXT.
"""

from __future__ import annotations

import re
from typing import Any

from tests.e2e.fake_model import SEEDS, AnsweringChat, Failure, Stream, _text, _text_events

SAY = re.compile(r"^\s*/say\s(.*)$", re.DOTALL)
BUSY = re.compile(r"^\s*/busy\s(.*)$", re.DOTALL)


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class PageChat(AnsweringChat):
    def __init__(self) -> None:
        super().__init__()
        self.busy_refused: set[str] = set()

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
        busy = BUSY.match(text)
        if busy and last_is_user:
            if text not in self.busy_refused:
                self.busy_refused.add(text)
                error = {"error": {"type": "rate_limit_error", "message": "busy, try later"}}
                return Failure(429, error, {"retry-after": "1"})
            return Stream(_text_events(_pieces(busy.group(1))))
        return super().respond(body)
