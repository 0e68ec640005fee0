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
calls, every one with its start offset from the turn's start and its duration; a ledger
made while timelines are off (``observe.keep_timelines``) has none.
"""

from __future__ import annotations

import bisect
import time
from typing import TYPE_CHECKING, Any, Protocol

from ostinato.observe import prices

if TYPE_CHECKING:
    from ostinato.models.base import Usage

# What the ledger reads of the scopes (``observe.scopes``' ``CallScope``, ``ToolScope``,
# ``StepScope``), so this module does not import the one that makes ledgers.


class CallScope(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def purpose(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def usage(self) -> Usage | None: ...
    @property
    def started(self) -> float: ...
    @property
    def first(self) -> float | None: ...
    @property
    def ended(self) -> float | None: ...
    @property
    def stop_reason(self) -> str | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def retries(self) -> tuple[str, ...]: ...


class ToolScope(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def call_id(self) -> str: ...
    @property
    def status(self) -> str | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def started(self) -> float: ...
    @property
    def ended(self) -> float | None: ...
    @property
    def approval(self) -> str | None: ...
    @property
    def waited(self) -> float | None: ...


class StepScope(Protocol):
    @property
    def started(self) -> float: ...
    @property
    def ended(self) -> float | None: ...
    @property
    def duration(self) -> float: ...


Entry = tuple[Any, str | None, str | None]  # (scope, sub-agent name, parent tool call id)


class TurnLedger:
    __slots__ = ("_kept", "after", "calls", "closed", "started", "steps", "timed", "tools")

    def __init__(self, started: float, timed: bool = True) -> None:
        self.started = started
        self.timed = timed  # it makes a timeline
        self.closed: float | None = None
        self.calls: list[Entry] = []
        self.tools: list[Entry] = []
        self.after: list[Entry] = []  # calls made for the turn after it ended
        self.steps: list[StepScope] = []
        self._kept: tuple[tuple[int, int, int, str | None], dict[str, Any]] | None = None

    def add(self, scope: CallScope | ToolScope, agent: str | None, under: str | None) -> None:
        """Record ``scope`` (``observe.scopes`` appends to ``calls`` and ``tools`` itself)."""
        entries = self.calls if scope.kind == "model_call" else self.tools
        entries.append((scope, agent, under))

    def close(self) -> None:
        if self.closed is None:
            self.closed = time.perf_counter()

    def absorb(self, later: TurnLedger) -> None:
        """Calls made for the turn after it ended (another ledger's)."""
        self.after.extend(later.calls)

    # --- the metrics block -----------------------------------------------------------

    def snapshot(self, model: str | None = None) -> dict[str, Any]:
        """The block as of now (a copy: the caller may add to it). It is made once for
        what has been counted: asked again with no call counted since (a turn's block
        is asked for twice as it ends: its final message's and its record's), it is the
        same block, its response time included."""
        key = (len(self.calls), len(self.after), len(self.tools), model)
        kept = self._kept
        if kept is None or kept[0] != key:
            kept = self._kept = (key, self._block(model))
        return dict(kept[1])

    def _block(self, model: str | None) -> dict[str, Any]:
        """The calls added up by model and purpose in one pass (no call per entry: it
        runs every turn), and the turn's own tool calls by name."""
        sums: dict[str, list[int]] = {}  # by model: calls, the four counts, uncached input
        purposes: dict[str, int] = {}
        sources: set[str] = set()
        for entries in (self.calls, self.after):
            for call, _, _ in entries:
                purposes[call.purpose] = purposes.get(call.purpose, 0) + 1
                found = sums.get(call.model)
                if found is None:
                    found = sums[call.model] = [0, 0, 0, 0, 0, 0]
                found[0] += 1
                usage = call.usage
                if usage is not None:
                    cache_read, cache_write = usage.cache_read_tokens, usage.cache_write_tokens
                    found[1] += usage.input_tokens
                    found[2] += usage.output_tokens
                    found[3] += cache_read
                    found[4] += cache_write
                    found[5] += max(0, usage.input_tokens - cache_read - cache_write)
                    sources.add(usage.source)
        models, tokens_in, tokens_out, cost, unpriced = {}, 0, 0, 0.0, []
        for name, (calls, t_in, t_out, c_read, c_write, uncached) in sums.items():
            priced = prices.tokens_cost(name, t_in, t_out, c_read, c_write, uncached)
            if priced is None:
                unpriced.append(name)  # never guessed: the block names the model instead
            else:
                cost += priced
            models[name] = {
                "calls": calls,
                "tokens_in": t_in,
                "tokens_out": t_out,
                "cache_read_tokens": c_read,
                "cache_write_tokens": c_write,
                "cost_usd": round(priced, 6) if priced is not None else None,
            }
            tokens_in += t_in
            tokens_out += t_out
        tools: dict[str, int] = {}
        for scope, agent, _ in self.tools:
            if agent is None:
                tools[scope.name] = tools.get(scope.name, 0) + 1
        end = self.closed if self.closed is not None else time.perf_counter()
        return {
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "tokens_total": tokens_in + tokens_out,
            "tokens_source": _source(sources),
            "model_calls": len(self.calls) + len(self.after),
            "model_calls_by_purpose": purposes,
            "model": model,
            "models": models,
            "cost_usd": None if unpriced else round(cost, 6),
            "unpriced": sorted(unpriced),
            "tools": tools,
            "response_time_s": round(end - self.started, 3),
        }

    # --- the timeline ----------------------------------------------------------------

    def timeline(self) -> dict[str, Any] | None:
        """The steps (step 0 holds what came before the first model call of the turn:
        routing, turn-zero reads, a carried approval's call), and ``after_turn``; None
        when timelines were off as the turn began. Each call's entry is made in one go
        (``_call``, ``_tool``): this runs once a turn, with everything else of it."""
        if not self.timed:
            return None
        t0 = self.started
        starts = [step.started for step in self.steps]
        calls: list[list[dict[str, Any]]] = [[] for _ in range(len(starts) + 1)]
        tools: list[list[dict[str, Any]]] = [[] for _ in range(len(starts) + 1)]
        # a call with no start time was only counted (timelines were switched off after
        # the turn began: ``observe.counted``): it is left out
        for started, _, (scope, agent, under) in _by_start(self.calls):
            if started:
                at = bisect.bisect_right(starts, started)
                calls[at].append(_call(scope, agent, under, t0))
        for started, _, (scope, agent, under) in _by_start(self.tools):
            if started:
                at = bisect.bisect_right(starts, started)
                tools[at].append(_tool(scope, agent, under, t0))
        end = self.closed if self.closed is not None else time.perf_counter()
        steps = []
        if calls[0] or tools[0]:
            ended = starts[0] if starts else end
            steps.append(_step(0, 0.0, _us(ended - t0), calls[0], tools[0]))
        for index, step in enumerate(self.steps, 1):
            begun, ended = step.started, step.ended if step.ended is not None else end
            steps.append(  # times rounded inline, as ``_call`` does (a step each)
                {
                    "index": index,
                    "start_s": round((begun - t0) * 1e6) / 1e6,
                    "duration_s": round((ended - begun) * 1e6) / 1e6,
                    "model_calls": calls[index],
                    "tool_calls": tools[index],
                }
            )
        return {
            "duration_s": _us(end - t0),
            "steps": steps,
            "after_turn": [_call(s, a, u, t0) for s, a, u in self.after if s.started],
        }


def _by_start(entries: list[Entry]) -> list[tuple[float, int, Entry]]:
    """The entries by their scope's start (the order they were recorded in for equal
    starts), each with its start: sorted as tuples, with no call per entry."""
    decorated = [(entry[0].started, i, entry) for i, entry in enumerate(entries)]
    decorated.sort()
    return decorated


def _us(seconds: float) -> float:
    """``round(seconds, 6)``, the quick way (to the microsecond: the timeline's unit)."""
    return round(seconds * 1e6) / 1e6


def _step(
    index: int, start: float, duration: float, calls: list[Any], tools: list[Any]
) -> dict[str, Any]:
    return {
        "index": index,
        "start_s": start,
        "duration_s": duration,
        "model_calls": calls,
        "tool_calls": tools,
    }


def _call(scope: CallScope, agent: str | None, under: str | None, t0: float) -> dict[str, Any]:
    # times to the microsecond, rounded inline (``_us``: a call per value costs more here)
    usage, started = scope.usage, scope.started
    first, ended = scope.first, scope.ended
    return {
        "purpose": scope.purpose,
        "model": scope.model,
        "start_s": round((started - t0) * 1e6) / 1e6,
        "duration_s": round((ended - started) * 1e6) / 1e6 if ended is not None else None,
        "time_to_first_token_s": (
            round((first - started) * 1e6) / 1e6 if first is not None else None
        ),
        "tokens_in": usage.input_tokens if usage else 0,
        "tokens_out": usage.output_tokens if usage else 0,
        "cache_read_tokens": usage.cache_read_tokens if usage else 0,
        "cache_write_tokens": usage.cache_write_tokens if usage else 0,
        "stop_reason": scope.stop_reason,
        "error": scope.error,
        "retries": list(scope.retries) if scope.retries else [],
        "agent": agent,
        "under": under,
    }


def _tool(scope: ToolScope, agent: str | None, under: str | None, t0: float) -> dict[str, Any]:
    waited, started, ended = scope.waited, scope.started, scope.ended
    return {
        # a sub-agent's call is recorded under its parent call's id (``subagents``)
        "id": f"{under}/{scope.call_id}" if under else scope.call_id,
        "name": scope.name,
        "status": scope.status or scope.error,
        "start_s": round((started - t0) * 1e6) / 1e6,
        "duration_s": round((ended - started) * 1e6) / 1e6 if ended is not None else None,
        "approval": scope.approval,
        "approval_wait_s": round(waited * 1e6) / 1e6 if waited is not None else None,
        "agent": agent,
        "under": under,
    }


def _source(sources: set[str]) -> str:
    if not sources:
        return "none"
    if len(sources) == 1:
        return next(iter(sources))
    return "mixed" if "provider" in sources else "estimate"
