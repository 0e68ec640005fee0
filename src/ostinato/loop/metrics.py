"""Per-turn metrics: the block every final assistant message carries."""

from __future__ import annotations

import time
from typing import Any

from ostinato.models.base import Usage


class TurnMetrics:
    __slots__ = ("_started", "model_calls", "tokens_in", "tokens_out", "tools")

    def __init__(self) -> None:
        self._started = time.perf_counter()
        self.model_calls = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self.tools: dict[str, int] = {}

    def model_call(self, usage: Usage) -> None:
        self.model_calls += 1
        self.tokens_in += usage.input_tokens
        self.tokens_out += usage.output_tokens

    def compaction(self, usage: Usage) -> None:
        """A summary call: its tokens count, it is not one of the turn's model calls."""
        self.tokens_in += usage.input_tokens
        self.tokens_out += usage.output_tokens

    def tool_call(self, name: str) -> None:
        self.tools[name] = self.tools.get(name, 0) + 1

    def snapshot(self) -> dict[str, Any]:
        return {
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "tokens_total": self.tokens_in + self.tokens_out,
            "model_calls": self.model_calls,
            "tools": dict(self.tools),
            "response_time_s": round(time.perf_counter() - self._started, 3),
        }
