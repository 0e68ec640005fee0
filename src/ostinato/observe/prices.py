"""What model calls cost: a price table in US dollars per million tokens, and the estimate
of one call's cost from its token counts.

The built-in table holds the default tiers' hosted models (``models.choice``), at the
providers' list prices for standard requests (no batch discount, no long-context
surcharge, no regional uplift). A deployment adds or overrides entries with the setting
``observability.prices``. A model with no entry has no price: its cost is ``None`` and the
metrics block names it, rather than guess (a local model's price is the deployment's
to say, for instance zero).

Token counts are as the provider sent them. Anthropic counts cached tokens apart from
``input_tokens``; the OpenAI protocol counts them inside it; so for every provider but
Anthropic the cached tokens are taken out of the input before it is priced. Cache reads
and writes without a price of their own are priced as input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ostinato.models.base import Usage

MILLION = 1_000_000


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None


# List prices, standard tier, as published by the providers (checked 2025-11).
BUILT_IN: dict[str, Price] = {
    "anthropic:claude-haiku-4-5": Price(1.0, 5.0, cache_read=0.10, cache_write=1.25),
    "anthropic:claude-sonnet-4-5": Price(3.0, 15.0, cache_read=0.30, cache_write=3.75),
    "anthropic:claude-opus-4-5": Price(5.0, 25.0, cache_read=0.50, cache_write=6.25),
    "openai:gpt-4.1-mini": Price(0.40, 1.60, cache_read=0.10),
    "openai:gpt-4.1": Price(2.0, 8.0, cache_read=0.50),
    "openai:gpt-5": Price(1.25, 10.0, cache_read=0.125),
}
# The same models through OpenAI's Chat Completions API cost the same.
BUILT_IN.update(
    {
        "openai-chat:" + model_id.split(":", 1)[1]: price
        for model_id, price in list(BUILT_IN.items())
        if model_id.startswith("openai:")
    }
)

_table: dict[str, Price] = dict(BUILT_IN)


def configure(extra: Mapping[str, Price]) -> None:
    """The built-in table, with ``extra`` added over it (the settings' prices)."""
    _table.clear()
    _table.update(BUILT_IN)
    _table.update(extra)


def price_of(model_id: str) -> Price | None:
    return _table.get(model_id)


def cost(model_id: str, usage: Usage) -> float | None:
    """The call's estimated cost in US dollars; ``None`` when the model has no price."""
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    return tokens_cost(
        model_id,
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        max(0, usage.input_tokens - cached),
    )


def tokens_cost(
    model_id: str,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int,
    cache_write_tokens: int,
    uncached: int,
) -> float | None:
    """The estimated cost of calls to one model from their summed token counts (the
    metrics block prices each model once per turn); ``uncached`` is the sum over the
    calls of each one's input tokens less its cached ones, never below zero, which is
    what is priced as input for every provider but Anthropic. ``None``: no price."""
    price = _table.get(model_id)
    if price is None:
        return None
    anthropic = model_id.startswith("anthropic:") or model_id == "anthropic"
    plain = input_tokens if anthropic else uncached
    read = price.cache_read if price.cache_read is not None else price.input
    write = price.cache_write if price.cache_write is not None else price.input
    total = (
        plain * price.input
        + output_tokens * price.output
        + cache_read_tokens * read
        + cache_write_tokens * write
    )
    return total / MILLION
