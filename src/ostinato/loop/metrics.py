"""Per-turn metrics: the block every final assistant message carries.

``tokens_source`` says who counted the tokens: ``provider`` (every call's counts came from
the provider), ``estimate`` (no call's did: a server that sends no usage, such as
llama.cpp's, gets ostinato's estimate), ``mixed`` (some of each), ``unknown`` (no counts
and nothing to estimate from), or ``none`` (no model call was made).
"""

from __future__ import annotations

import time
from typing import Any

from ostinato.models.base import Usage


class TurnMetrics:
    __slots__ = ("_sources", "_started", "model_calls", "tokens_in", "tokens_out", "tools")

    def __init__(self) -> None:
        self._started = time.perf_counter()
        self.model_calls = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self.tools: dict[str, int] = {}
        self._sources: set[str] = set()

    def model_call(self, usage: Usage) -> None:
        self.model_calls += 1
        self._count(usage)

    def compaction(self, usage: Usage) -> None:
        """A summary call: its tokens count, it is not one of the turn's model calls."""
        self._count(usage)

    def _count(self, usage: Usage) -> None:
        self.tokens_in += usage.input_tokens
        self.tokens_out += usage.output_tokens
        self._sources.add(usage.source)

    def tool_call(self, name: str) -> None:
        self.tools[name] = self.tools.get(name, 0) + 1

    def snapshot(self) -> dict[str, Any]:
        return {
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "tokens_total": self.tokens_in + self.tokens_out,
            "tokens_source": _source(self._sources),
            "model_calls": self.model_calls,
            "tools": dict(self.tools),
            "response_time_s": round(time.perf_counter() - self._started, 3),
        }


def _source(sources: set[str]) -> str:
    if not sources:
        return "none"
    if len(sources) == 1:
        return next(iter(sources))
    return "mixed" if "provider" in sources else "estimate"
