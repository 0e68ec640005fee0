"""The context keeper: the turn driver's collaborator for request size.

Before each model call it checks the request against the model's window; when it is too
big (or the provider refused it), ``compact`` shrinks the history part of the request:

1. With earlier turns in the window, the older ones (all but the newest earlier turn, or
   all of them if there is only one) are summarised by a cheap model call; the summary is
   stored as the new watermark row and replaces them in the request. Over budget by the
   estimate (not refused by the provider), they are summarised only when that frees at
   least a tenth of the budget: short turns are kept as they were said.
2. With nothing earlier to summarise (or when the summary call fails), the older half of
   the current turn's finished steps is left out of the request instead (whole
   tool_use / tool_result groups, so the history stays valid).

Either way a ``context.compacted`` frame says what happened; the store keeps every row.
"""

from __future__ import annotations

from typing import Protocol

from ostinato import observe
from ostinato.bus import Bus
from ostinato.context.compaction import Compactor, summary_row
from ostinato.context.tokens import (
    CHARS_PER_TOKEN,
    estimate_message,
    estimate_messages,
    estimate_tools,
)
from ostinato.context.window import boundaries
from ostinato.errors import ModelError
from ostinato.frames import ContextCompacted
from ostinato.messages import Message
from ostinato.models.base import Model, ModelRequest, Usage
from ostinato.store.base import AppendSummary, Store, Turn

DEFAULT_RESERVE = 4_096  # tokens kept for the answer when the agent sets no max_tokens
ANSWER_SHARE = 8  # ... at most this part of a small window (1,024 of an 8,192 one)
USEFUL_SHARE = 10  # a summary must free at least this part of the budget to be made


class Host(Protocol):
    """What the keeper works on: the driver of the turn. ``history`` is changed in place;
    its first ``prior_count`` rows are those before the turn's own."""

    prior_count: int

    @property
    def store(self) -> Store: ...
    @property
    def bus(self) -> Bus: ...
    @property
    def model(self) -> Model: ...
    @property
    def turn(self) -> Turn: ...
    @property
    def history(self) -> list[Message]: ...

    @property
    def seq(self) -> int: ...


class ContextKeeper:
    def __init__(self, compactor: Compactor, *, reserve: int | None = None) -> None:
        self.compactor = compactor
        self.reserve = reserve or DEFAULT_RESERVE
        self.asked = bool(reserve)  # the agent's max_tokens: kept whatever the window
        self.last: ContextCompacted | None = None
        # Per-message estimates of the host's history, kept in step as it grows (the
        # driver only appends; compaction, which rewrites it, starts them afresh), so a
        # step costs the estimate of its new rows, not of the whole history.
        self._sizes: list[int] = []
        self._total = 0
        self._fixed: int | None = None  # the system prompt and the tool definitions
        # each model's budget (``budget``), asked once a turn: its window and the
        # reserve do not change while the turn runs
        self._budgets: dict[str, int] = {}

    def known(self, count: int, tokens: int) -> None:
        """The first ``count`` messages of the history are already estimated: ``tokens``
        (the window's own estimate), so the first request does not estimate them again."""
        self._sizes = [0] * count
        self._total = tokens

    def raw(self, host: Host, request: ModelRequest) -> int:
        """The uncalibrated estimate of ``request``, built from ``host.history``."""
        if self._fixed is None:
            self._fixed = int(len(request.system) / CHARS_PER_TOKEN) + estimate_tools(request.tools)
        history = host.history
        while len(self._sizes) < len(history):
            size = estimate_message(history[len(self._sizes)])
            self._sizes.append(size)
            self._total += size
        return self._fixed + self._total

    def over_budget(self, host: Host, request: ModelRequest) -> bool:
        name = host.model.name
        estimate = self.raw(host, request) * self.compactor.estimator.factor(name)
        budget = self._budgets.get(name)
        if budget is None:
            budget = self._budgets[name] = self.budget(host.model)
        return estimate > budget

    def budget(self, model: Model) -> int:
        """The request's budget: the window less the answer's reserve; without an agent's
        ``max_tokens``, the reserve is at most an eighth of the window (a small local
        model's 8,192 tokens keep 1,024 for the answer, not half)."""
        reserve = self.reserve
        if not self.asked:
            reserve = min(reserve, self.compactor.catalog.window(model.name) // ANSWER_SHARE)
        return self.compactor.budget(model, reserve)

    def observe(self, host: Host, request: ModelRequest, usage: Usage) -> None:
        """Calibrate the estimate by what the provider counted (never by an estimate)."""
        if usage.input_tokens and usage.source == "provider":
            raw = self.raw(host, request)
            self.compactor.estimator.calibrate(host.model.name, raw, usage.input_tokens)

    def _forget_sizes(self) -> None:
        self._sizes, self._total = [], 0

    async def compact(self, host: Host, reason: str = "estimate") -> bool:
        """Shrink the request's history; False when there is nothing left to shrink. The
        summary call is counted in the turn's metrics where every model call is
        (``ostinato.observe``)."""
        with observe.operation("compaction", reason=reason) as work:
            done = await self._compact(host, reason)
            work.note(method=self.last.method if done and self.last else "none")
            return done

    async def _compact(self, host: Host, reason: str) -> bool:
        prior = host.history[: host.prior_count]
        summary = prior[0] if prior and prior[0].metadata.get("kind") == "summary" else None
        rows = prior[1:] if summary is not None else prior
        before = estimate_messages(host.history)
        starts = boundaries(rows)
        keep_from = starts[-1] if len(starts) >= 2 else len(rows)
        older, newer = rows[:keep_from], rows[keep_from:]
        # an estimate over budget is no reason to summarise what frees nothing; the
        # provider's refusal is
        if older and (reason != "estimate" or self._frees_enough(host.model, older)):
            try:
                made = await self.compactor.summarise(host.model, summary, older)
            except ModelError:
                made = None
            if made is not None and made.text:
                through = max(r.seq or 0 for r in older)
                (row,) = await host.store.write(
                    AppendSummary(
                        host.turn.conversation_id,
                        summary_row(made.text, through),
                        through,
                        host.turn.id,
                    )
                )
                host.history[: host.prior_count] = [row, *newer]
                host.prior_count = 1 + len(newer)
                self._forget_sizes()
                self._announce(host, "summary", reason, len(older), through, before)
                return True
        return self._drop_steps(host, reason, before)

    def _frees_enough(self, model: Model, older: list[Message]) -> bool:
        """Whether summarising ``older`` frees a useful share of the budget: a few short
        turns are kept as they are (a summary of them would free nothing, cost a model
        call, and stand in for what was said)."""
        return estimate_messages(older) * USEFUL_SHARE >= self.budget(model)

    def _drop_steps(self, host: Host, reason: str, before: int) -> bool:
        """Leave the older half of this turn's finished steps out of the request."""
        working = host.history[host.prior_count :]
        groups: list[tuple[int, int]] = []  # [start, end) of assistant+tool groups
        index = 0
        while index < len(working):
            row = working[index]
            end = index + 1
            if row.role == "assistant" and row.tool_uses:
                while end < len(working) and working[end].role == "tool":
                    end += 1
                if end < len(working):  # a finished step (not the newest one)
                    groups.append((index, end))
            index = end
        if len(groups) < 2:
            return False
        cut = groups[len(groups) // 2 - 1][1]  # the end of the older half (at least one group)
        first = groups[0][0]
        dropped = cut - first
        del working[first:cut]
        host.history[host.prior_count :] = working
        self._forget_sizes()
        self._announce(host, "dropped", reason, dropped, None, before)
        return True

    def _announce(
        self,
        host: Host,
        method: str,
        reason: str,
        dropped: int,
        through: int | None,
        before: int,
    ) -> None:
        frame = ContextCompacted(
            run_id=host.turn.run_id,
            seq=host.seq,
            method=method,
            reason=reason,
            dropped=dropped,
            through_seq=through,
            tokens_before=before,
            tokens_after=estimate_messages(host.history),
        )
        self.last = frame
        host.bus.publish(host.turn.conversation_id, frame)
