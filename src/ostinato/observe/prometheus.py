"""Prometheus metrics: the observed work counted and timed (``prometheus-client``).

Every metric is named ``ostinato_*`` (the table is in docs/observability.md). Labels are
low-cardinality: a stop reason, a ``provider:model`` id, a token kind, a retry's error
code, a tool's name and status, an approval's ending. With ``PROMETHEUS_MULTIPROC_DIR``
set, prometheus-client keeps each process's values in that directory and ``exposition``
sums the processes' (gauges as ``livesum``: the live processes' sum).

Per step the work is small: labelled children are looked up once per label value and
kept, each histogram is observed once per step, call or tool; nothing per streamed delta.
"""

from __future__ import annotations

import os
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
from ostinato.observe.scopes import ApprovalScope, CallScope, Scope, StepScope, ToolScope, TurnScope

SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
COMMIT_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
TOKEN_KINDS = ("input", "output", "cache_read", "cache_write")


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


class PrometheusBackend(Backend):
    """Counts and times the observed work into ``Metrics``."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.m = Metrics(self.registry)
        self._children: dict[tuple[str, ...], Any] = {}

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (str(id(metric)), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def started(self, scope: Scope) -> None:
        if isinstance(scope, TurnScope):
            self.m.active.inc()

    def ended(self, scope: Scope) -> None:
        if isinstance(scope, StepScope):
            self.m.step_seconds.observe(scope.duration)
        elif isinstance(scope, CallScope):
            self._call(scope)
        elif isinstance(scope, ToolScope):
            self._child(self.m.tools, scope.name, scope.status or scope.error or "unknown").inc()
        elif isinstance(scope, ApprovalScope):
            ending = scope.attributes.get("ending") or scope.error or "unknown"
            self._child(self.m.approvals, str(ending)).inc()
        elif isinstance(scope, TurnScope):
            self.m.active.dec()
            self._child(self.m.turns, scope.stop_reason or scope.error or "unknown").inc()
            self.m.turn_seconds.observe(scope.duration)

    def _call(self, scope: CallScope) -> None:
        model = scope.model
        self._child(self.m.call_seconds, model).observe(scope.duration)
        ttft = scope.time_to_first_token
        if ttft is not None:
            self._child(self.m.ttft, model).observe(ttft)
        usage = scope.usage
        if usage is None or usage.source == "unknown":
            return
        counts = (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
        )
        for kind, count in zip(TOKEN_KINDS, counts, strict=True):
            if count:
                self._child(self.m.tokens, model, kind).inc(count)

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
