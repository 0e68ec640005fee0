"""The ``[observability]`` section: model prices for the metrics block's cost estimate,
trace content, Prometheus metrics and the log format (docs/observability.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from ostinato.config.sections import Section


class PriceEntry(Section):
    input: float = Field(ge=0, allow_inf_nan=False, description="Per million input tokens.")
    output: float = Field(ge=0, allow_inf_nan=False, description="Per million output tokens.")
    cache_read: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="Per million cached input tokens."
    )
    cache_write: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Per million tokens cached.",
    )


class ObservabilitySection(Section):
    prices: dict[str, PriceEntry] = Field(
        default_factory=dict,
        description="US dollars per million tokens by `provider:model` id, over the built-in "
        'table: `{input, output, cache_read, cache_write}` (`{"ollama:qwen3:8b": {"input": 0, '
        '"output": 0}}`); a model with no price has no cost estimate.',
    )
    capture_content: bool = Field(
        default=False,
        description="Put prompts, replies, tool arguments and tool results on the trace "
        "spans (`gen_ai.input.messages`, `gen_ai.output.messages`, "
        "`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`). Off: spans carry "
        "names, models, counts and timings only.",
    )
    timeline: bool = Field(
        default=True,
        description="Keep each turn's timeline (its steps, model calls and tool calls with "
        "their times: `GET /v1/conversations/{id}/turns/{turn_id}`, `ostinato replay "
        "--timeline`, the page's timeline). Off: turns store none, and with no traces and "
        "no metrics a step does only what the metrics block needs.",
    )
    metrics: bool = Field(
        default=False,
        description="Serve Prometheus metrics at `/metrics` (needs the `metrics` extra: "
        "`pip install 'ostinato[metrics]'`). With `PROMETHEUS_MULTIPROC_DIR` set, "
        "several worker processes' metrics are summed.",
    )
    metrics_token: SecretStr | None = Field(
        default=None,
        description="When set, `/metrics` answers only a request with "
        "`Authorization: Bearer <token>` (401 otherwise). Needed outside auth mode "
        "`none` (the server refuses to start without it); unset in mode `none`, it is open.",
    )
    log_format: Literal["plain", "json"] = Field(
        default="plain",
        description="`ostinato serve`'s logs: `plain` text lines, or `json`: one object "
        "a line with `time`, `level`, `logger`, `event`, and `conversation_id`, `run_id`, "
        "`owner` when the line was logged during a turn (`--log-format`).",
    )
