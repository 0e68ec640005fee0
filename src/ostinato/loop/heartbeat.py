"""Heartbeats: a long tool call that reports nothing still shows it is alive.

While tool calls run, every ``interval`` seconds each call that has not reported progress
for that long gets a ``tool.progress`` frame with ``heartbeat: true``, so a surface never
looks frozen. One timer serves every running call of a turn (no task per call).

A call waiting for a person (an approval) gets no beats: the card already says what it
waits on. Its beats are deferred, not dropped: once the call runs, they come again, an
interval after the wait ended, counting from then (as the Kotoba reference does).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

HEARTBEAT_S = 5.0


class Heartbeat:
    def __init__(
        self, beat: Callable[[str, str, float], None], interval: float = HEARTBEAT_S
    ) -> None:
        self._beat = beat  # (tool_use_id, name, seconds running)
        self.interval = interval
        self._running: dict[str, tuple[str, float, float]] = {}  # id -> name, start, last
        self._waiting: set[str] = set()  # calls waiting for a person: no beats
        self._timer: asyncio.TimerHandle | None = None

    def start(self, tool_use_id: str, name: str) -> None:
        now = time.monotonic()
        self._running[tool_use_id] = (name, now, now)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.interval, self._tick)

    def touch(self, tool_use_id: str) -> None:
        """The call reported progress: its next beat waits a full interval."""
        entry = self._running.get(tool_use_id)
        if entry is not None:
            self._running[tool_use_id] = (entry[0], entry[1], time.monotonic())

    def waiting(self, tool_use_id: str) -> None:
        """The call waits for a person: no beats until ``resumed``."""
        self._waiting.add(tool_use_id)

    def resumed(self, tool_use_id: str) -> None:
        """The wait is over and the call runs: its beats count from now."""
        self._waiting.discard(tool_use_id)
        entry = self._running.get(tool_use_id)
        if entry is not None:
            now = time.monotonic()
            self._running[tool_use_id] = (entry[0], now, now)

    def done(self, tool_use_id: str) -> None:
        # The timer is left to run out: it stops itself when nothing runs, which is
        # cheaper than cancelling and making one for every call.
        self._running.pop(tool_use_id, None)
        self._waiting.discard(tool_use_id)

    def stop(self) -> None:
        """The turn ended: no more beats."""
        self._running.clear()
        self._waiting.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self) -> None:
        self._timer = None
        now = time.monotonic()
        for tool_use_id, (name, started, last) in list(self._running.items()):
            if tool_use_id in self._waiting:
                continue
            if now - last >= self.interval * 0.99:
                self._running[tool_use_id] = (name, started, now)
                self._beat(tool_use_id, name, now - started)
        if self._running:
            self._timer = asyncio.get_running_loop().call_later(self.interval, self._tick)
