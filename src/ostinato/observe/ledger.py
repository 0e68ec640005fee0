"""A turn's ledger: every model call and tool call the turn caused, from which come the
metrics block every final assistant message carries and the turn's timeline.

The ledger records calls as they end (``observe.scopes``): the turn's own model calls
(``step``, ``wrap_up``), its side calls (``router``, ``summary`` for compaction), its
sub-agents' calls (each with the sub-agent's name and the tool call it ran under), and,
once they end, the calls made for the turn after it finished (``extraction``).

The block (``snapshot``):

- ``model_calls``, ``tokens_in``, ``tokens_out``, ``tokens_total``: every call above;
  ``model_calls_by_purpose`` counts them by purpose;
- ``tokens_source`` says who counted the tokens: ``provider`` (every call's counts came
  from the provider), ``estimate`` (no call's did: a server that sends no usage, such as
  llama.cpp's, gets ostinato's estimate), ``mixed`` (some of each), ``unknown`` (no
  counts and nothing to estimate from), or ``none`` (no model call was made);
- ``model`` is the turn's own model; ``models`` breaks calls, tokens and cost down by
  model;
- ``cost_usd`` is the estimated cost (``observe.prices``), ``None`` when a model that was
  called has no price: those are listed in ``unpriced``;
- ``tools`` counts the turn's own tool calls by name; ``response_time_s`` is the time
  from the turn's start (before routing) to its end.

The timeline (``timeline``) lists the turn's steps, each with its model calls and tool
calls, every one with its start offset from the turn's start and its duration.
"""

from __future__ import annotations

import bisect
import time
from typing import TYPE_CHECKING, Any

from ostinato.observe import prices

if TYPE_CHECKING:
    from ostinato.observe.scopes import CallScope, StepScope, ToolScope

Entry = tuple[Any, str | None, str | None]  # (scope, sub-agent name, parent tool call id)


class TurnLedger:
    __slots__ = ("after", "calls", "closed", "started", "steps", "tools")

    def __init__(self, started: float) -> None:
        self.started = started
        self.closed: float | None = None
        self.calls: list[Entry] = []
        self.tools: list[Entry] = []
        self.after: list[Entry] = []  # calls made for the turn after it ended
        self.steps: list[StepScope] = []

    def add(self, scope: CallScope | ToolScope, agent: str | None, under: str | None) -> None:
        if scope.kind == "model_call":
            self.calls.append((scope, agent, under))
        else:
            self.tools.append((scope, agent, under))

    def close(self) -> None:
        if self.closed is None:
            self.closed = time.perf_counter()

    def absorb(self, later: TurnLedger) -> None:
        """Calls made for the turn after it ended (another ledger's)."""
        self.after.extend(later.calls)

    # --- the metrics block -----------------------------------------------------------

    def snapshot(self, model: str | None = None) -> dict[str, Any]:
        calls = [scope for scope, _, _ in (*self.calls, *self.after)]
        models: dict[str, dict[str, Any]] = {}
        purposes: dict[str, int] = {}
        sources: set[str] = set()
        for call in calls:
            purposes[call.purpose] = purposes.get(call.purpose, 0) + 1
            _count(models.setdefault(call.model, _empty()), call)
            if call.usage is not None:
                sources.add(call.usage.source)
        unpriced = sorted(m for m, entry in models.items() if entry["cost_usd"] is None)
        tokens_in = sum(entry["tokens_in"] for entry in models.values())
        tokens_out = sum(entry["tokens_out"] for entry in models.values())
        end = self.closed if self.closed is not None else time.perf_counter()
        tools: dict[str, int] = {}
        for scope, agent, _ in self.tools:
            if agent is None:
                tools[scope.name] = tools.get(scope.name, 0) + 1
        return {
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "tokens_total": tokens_in + tokens_out,
            "tokens_source": _source(sources),
            "model_calls": len(calls),
            "model_calls_by_purpose": purposes,
            "model": model,
            "models": {m: _rounded(entry) for m, entry in models.items()},
            "cost_usd": None if unpriced else round(sum(e["cost_usd"] for e in models.values()), 6),
            "unpriced": unpriced,
            "tools": tools,
            "response_time_s": round(end - self.started, 3),
        }

    # --- the timeline ----------------------------------------------------------------

    def timeline(self) -> dict[str, Any]:
        """The steps (step 0 holds what came before the first model call of the turn:
        routing, turn-zero reads, a carried approval's call), and ``after_turn``."""
        starts = [step.started for step in self.steps]
        slots: list[dict[str, list[dict[str, Any]]]] = [
            {"model_calls": [], "tool_calls": []} for _ in range(len(self.steps) + 1)
        ]
        for scope, agent, under in self.calls:
            slot = slots[bisect.bisect_right(starts, scope.started)]
            slot["model_calls"].append(self._call(scope, agent, under))
        for scope, agent, under in self.tools:
            slot = slots[bisect.bisect_right(starts, scope.started)]
            slot["tool_calls"].append(self._tool(scope, agent, under))
        end = self.closed if self.closed is not None else time.perf_counter()
        steps = []
        for index, slot in enumerate(slots):
            if index == 0:
                if not slot["model_calls"] and not slot["tool_calls"]:
                    continue
                begun, ended = self.started, starts[0] if starts else end
            else:
                step = self.steps[index - 1]
                begun, ended = step.started, step.ended if step.ended is not None else end
            steps.append({"index": index, **self._span(begun, ended), **_by_start(slot)})
        return {
            "duration_s": round(end - self.started, 6),
            "steps": steps,
            "after_turn": [self._call(scope, a, u) for scope, a, u in self.after],
        }

    def _span(self, begun: float, ended: float | None) -> dict[str, float | None]:
        return {
            "start_s": round(begun - self.started, 6),
            "duration_s": round(ended - begun, 6) if ended is not None else None,
        }

    def _call(self, scope: CallScope, agent: str | None, under: str | None) -> dict[str, Any]:
        usage = scope.usage
        ttft = scope.time_to_first_token
        return {
            "purpose": scope.purpose,
            "model": scope.model,
            **self._span(scope.started, scope.ended),
            "time_to_first_token_s": round(ttft, 6) if ttft is not None else None,
            "tokens_in": usage.input_tokens if usage else 0,
            "tokens_out": usage.output_tokens if usage else 0,
            "cache_read_tokens": usage.cache_read_tokens if usage else 0,
            "cache_write_tokens": usage.cache_write_tokens if usage else 0,
            "stop_reason": scope.stop_reason,
            "error": scope.error,
            "retries": list(scope.retries),
            "agent": agent,
            "under": under,
        }

    def _tool(self, scope: ToolScope, agent: str | None, under: str | None) -> dict[str, Any]:
        waited = scope.waited
        return {
            # a sub-agent's call is recorded under its parent call's id (``subagents``)
            "id": f"{under}/{scope.call_id}" if under else scope.call_id,
            "name": scope.name,
            "status": scope.status or scope.error,
            **self._span(scope.started, scope.ended),
            "approval": scope.approval,
            "approval_wait_s": round(waited, 6) if waited is not None else None,
            "agent": agent,
            "under": under,
        }


def _empty() -> dict[str, Any]:
    return {
        "calls": 0,
        "tokens_in": 0,
        "tokens_out": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "cost_usd": 0.0,
    }


def _count(entry: dict[str, Any], call: CallScope) -> None:
    entry["calls"] += 1
    usage = call.usage
    if usage is not None:
        entry["tokens_in"] += usage.input_tokens
        entry["tokens_out"] += usage.output_tokens
        entry["cache_read_tokens"] += usage.cache_read_tokens
        entry["cache_write_tokens"] += usage.cache_write_tokens
    if prices.price_of(call.model) is None:
        entry["cost_usd"] = None  # never guessed: the block names the model instead
    elif entry["cost_usd"] is not None and usage is not None:
        entry["cost_usd"] += prices.cost(call.model, usage) or 0.0


def _rounded(entry: dict[str, Any]) -> dict[str, Any]:
    cost = entry["cost_usd"]
    return {**entry, "cost_usd": round(cost, 6) if cost is not None else None}


def _by_start(slot: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    return {kind: sorted(entries, key=lambda e: e["start_s"]) for kind, entries in slot.items()}


def _source(sources: set[str]) -> str:
    if not sources:
        return "none"
    if len(sources) == 1:
        return next(iter(sources))
    return "mixed" if "provider" in sources else "estimate"
