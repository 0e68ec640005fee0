"""The ``[observability]`` section: model prices for the metrics block's cost estimate."""

from __future__ import annotations

from pydantic import Field

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
