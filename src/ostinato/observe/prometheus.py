"""Prometheus metrics: the observed work counted and timed (``prometheus-client``).

Every metric is named ``ostinato_*`` (the table is in docs/observability.md). Labels are
low-cardinality: a stop reason, a ``provider:model`` id, a token kind, a retry's error
code, a tool's name and status, an approval's ending. With ``PROMETHEUS_MULTIPROC_DIR``
set, prometheus-client keeps each process's values in that directory and ``exposition``
sums the processes' (gauges as ``livesum``: the live processes' sum).

The work is counted from the ledgers (``observe.ledger``) when it ends: a turn's end
observes its duration and each of its steps'; the end of the outermost work (a turn, with
its sub-agents' calls; work after a turn) observes each model call's duration and time to
first token, and adds up tokens by model and kind and tool calls by tool and status, so
each counter moves once per label set per turn. So nothing is done per step or call while
a turn runs (a scrape sees a turn's calls once it has ended), labelled children are looked
up once per label value and kept; nothing per streamed delta. Approvals, retries, the
queue, streams and store commits are counted as they happen.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from ostinato.observe.backend import Backend
from ostinato.observe.ledger import Entry
from ostinato.observe.scopes import ApprovalScope, CallScope, Holder, Scope, ToolScope, TurnScope

SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
COMMIT_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
TOKEN_KINDS = ("input", "output", "cache_read", "cache_write")


OTHER = "other"  # the label of a tool or model the deployment did not configure


class Metrics:
    """The metric objects, registered in ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._counters(registry)
        self._timings(registry)
        self._gauges(registry)

    def _counters(self, r: CollectorRegistry) -> None:
        self.turns = Counter(
            "ostinato_turns", "Turns ended, by stop reason.", ["stop_reason"], registry=r
        )
        self.tools = Counter(
            "ostinato_tool_calls",
            "Tool calls, by tool and status.",
            ["tool", "status"],
            registry=r,
        )
        self.approvals = Counter(
            "ostinato_approvals", "Approval waits ended, by ending.", ["ending"], registry=r
        )
        self.tokens = Counter(
            "ostinato_model_tokens", "Tokens, by model and kind.", ["model", "kind"], registry=r
        )
        self.retries = Counter(
            "ostinato_model_retries",
            "Model call attempts retried, by cause.",
            ["cause"],
            registry=r,
        )

    def _timings(self, r: CollectorRegistry) -> None:
        self.turn_seconds = Histogram(
            "ostinato_turn_duration_seconds", "Turn duration.", buckets=SECONDS, registry=r
        )
        self.step_seconds = Histogram(
            "ostinato_step_duration_seconds", "Step duration.", buckets=SECONDS, registry=r
        )
        self.call_seconds = Histogram(
            "ostinato_model_call_duration_seconds",
            "Model call duration, by model.",
            ["model"],
            buckets=SECONDS,
            registry=r,
        )
        self.ttft = Histogram(
            "ostinato_model_time_to_first_token_seconds",
            "Time from a model call's start to its first content, by model.",
            ["model"],
            buckets=SECONDS,
            registry=r,
        )
        self.commits = Histogram(
            "ostinato_store_commit_seconds",
            "Store write (commit) latency.",
            buckets=COMMIT_SECONDS,
            registry=r,
        )

    def _gauges(self, r: CollectorRegistry) -> None:
        live: Any = "livesum"
        self.active = Gauge(
            "ostinato_active_turns",
            "Turns running (sub-agents' included).",
            registry=r,
            multiprocess_mode=live,
        )
        self.queued = Gauge(
            "ostinato_queued_messages",
            "Messages waiting in conversations' queues.",
            registry=r,
            multiprocess_mode=live,
        )
        self.streams = Gauge(
            "ostinato_open_streams",
            "Open event streams and WebSockets.",
            registry=r,
            multiprocess_mode=live,
        )


def observe_all(histogram: Any, values: Sequence[float]) -> None:
    """``histogram.observe(value)`` for each of ``values`` (``histogram``: one without
    labels or a labelled child), written as one addition to its sum and one to each bucket
    the values fall in, where ``observe`` makes two per value. It reads the histogram's
    bounds, sum and buckets as prometheus-client 0.x keeps them (``observe`` adds the
    value to ``_sum`` and 1 to the first of ``_buckets`` whose upper bound is at least the
    value); ``tests/observe/test_metrics.py`` checks the exposition is the one a call of
    ``observe`` per value makes, in one process and with ``PROMETHEUS_MULTIPROC_DIR``."""
    if not values:
        return
    bounds = histogram._upper_bounds
    falls: dict[int, int] = {}
    for value in values:
        at = bisect_left(bounds, value)
        falls[at] = falls.get(at, 0) + 1
    histogram._sum.inc(sum(values))
    buckets = histogram._buckets
    for at, count in falls.items():
        buckets[at].inc(count)


class PrometheusBackend(Backend):
    """Counts and times the observed work into ``Metrics``."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.m = Metrics(self.registry)
        self._children: dict[tuple[Any, ...], Any] = {}
        self._tools: Callable[[str], bool] | None = None
        self._models: Callable[[str], bool] | None = None

    def bound(self, *, tools: Callable[[str], bool], models: Callable[[str], bool]) -> None:
        """Name in labels only the tools and models these accept (the deployment's own
        tools, its configured models); any other is ``other``. A caller or a model can
        name tools and models without end, and a person's own tools are private."""
        self._tools, self._models = tools, models

    def _tool(self, name: str) -> str:
        return name if self._tools is None or self._tools(name) else OTHER

    def _model(self, name: str) -> str:
        return name if self._models is None or self._models(name) else OTHER

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    starts = frozenset({"turn"})
    ends = frozenset({"turn", "background", "job", "operation"})  # calls: from ledgers

    def started(self, scope: Scope) -> None:
        if isinstance(scope, TurnScope):
            self.m.active.inc()

    def ended(self, scope: Scope) -> None:
        if isinstance(scope, Holder):
            if isinstance(scope, TurnScope):
                self._turn(scope)
            if scope.holder() is None:  # the outermost: its ledger has every call under it
                self._count(scope.ledger.calls, scope.ledger.tools)
        elif isinstance(scope, ApprovalScope):
            ending = scope.attributes.get("ending") or scope.error or "unknown"
            self._child(self.m.approvals, str(ending)).inc()

    def unheld(self, scope: CallScope | ToolScope) -> None:
        if isinstance(scope, CallScope):
            self._count([(scope, None, None)], ())
        else:
            self._count((), [(scope, None, None)])

    def _turn(self, scope: TurnScope) -> None:
        """A turn ended: counted by stop reason, timed, and each of its steps timed."""
        m = self.m
        m.active.dec()
        self._child(m.turns, scope.stop_reason or scope.error or "unknown").inc()
        m.turn_seconds.observe(scope.duration)
        observe_all(m.step_seconds, [step.duration for step in scope.ledger.steps])

    def _count(self, calls: Sequence[Entry], tools: Sequence[Entry]) -> None:
        """The model calls and tool calls of a piece of work that has ended (its ledger's:
        a turn's include its sub-agents'): each call's duration and time to first token
        observed, tokens by model and kind and tool calls by tool and status added up, so
        each histogram and counter is written once per label set."""
        models: dict[str, tuple[list[float], list[float], list[int]]] = {}
        for call, _, _ in calls:
            label = self._model(call.model)
            found = models.get(label)
            if found is None:
                found = models[label] = ([], [], [0, 0, 0, 0])
            found[0].append(call.ended - call.started)  # ended: in a ledger once it has
            if call.first is not None:
                found[1].append(call.first - call.started)
            usage = call.usage
            if usage is not None and usage.source != "unknown":
                tokens = found[2]
                tokens[0] += usage.input_tokens
                tokens[1] += usage.output_tokens
                tokens[2] += usage.cache_read_tokens
                tokens[3] += usage.cache_write_tokens
        for model, (durations, firsts, tokens) in models.items():
            observe_all(self._child(self.m.call_seconds, model), durations)
            observe_all(self._child(self.m.ttft, model), firsts)
            for kind, count in zip(TOKEN_KINDS, tokens, strict=True):
                if count:
                    self._child(self.m.tokens, model, kind).inc(count)
        if tools:
            ran: dict[tuple[str, str], int] = {}
            for tool, _, _ in tools:
                key = (self._tool(tool.name), tool.status or tool.error or "unknown")
                ran[key] = ran.get(key, 0) + 1
            for (name, status), count in ran.items():
                self._child(self.m.tools, name, status).inc(count)

    def retried(self, scope: CallScope, cause: str) -> None:
        self._child(self.m.retries, cause).inc()

    def queued(self, delta: int) -> None:
        self.m.queued.inc(delta)

    def streams(self, delta: int) -> None:
        self.m.streams.inc(delta)

    def store_write(self, seconds: float) -> None:
        self.m.commits.observe(seconds)

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format: this process's, or every process's
        when ``PROMETHEUS_MULTIPROC_DIR`` is set."""
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            return generate_latest(registry)
        return generate_latest(self.registry)
