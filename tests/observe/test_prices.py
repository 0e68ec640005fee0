"""Prices for the metrics block's cost estimate: the built-in table, extended by the
setting ``observability.prices`` (file or environment); a bad price is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ostinato.config import ConfigError, load_config
from ostinato.deployment import build_runtime
from ostinato.models.base import Usage
from ostinato.models.offline import OfflineModel
from ostinato.observe import prices
from ostinato.store.memory import MemoryStore


@pytest.fixture(autouse=True)
def built_in_prices() -> Iterator[None]:
    yield
    prices.configure({})


async def test_the_settings_add_prices_the_metrics_block_uses(tmp_path: Path) -> None:
    file = tmp_path / "ostinato.toml"
    file.write_text(
        '[observability.prices."offline:ostinato"]\ninput = 0\noutput = 0\n'
        '[observability.prices."openai:gpt-4.1"]\ninput = 4\noutput = 16\n'
    )
    config, _ = load_config(file, env={})
    deployment = await build_runtime(
        config,
        MemoryStore(),
        default_model=OfflineModel(),
        default_id="offline:ostinato",
        data_dir=tmp_path / "data",
        env={},
    )
    runtime = deployment.runtime
    cid = (await runtime.create_conversation()).id
    result = await runtime.run_turn(cid, "hello")
    assert result.metrics["cost_usd"] == 0.0 and result.metrics["unpriced"] == []
    # an entry over a built-in one wins; the others stay
    assert prices.cost("openai:gpt-4.1", Usage(1_000_000, 0)) == pytest.approx(4.0)
    assert (
        prices.price_of("anthropic:claude-sonnet-4-5")
        == prices.BUILT_IN["anthropic:claude-sonnet-4-5"]
    )
    await deployment.aclose()
    await runtime.close()


def test_prices_from_the_environment_and_a_bad_one() -> None:
    env = {"OSTINATO_OBSERVABILITY__PRICES": '{"ollama:qwen3:8b": {"input": 0, "output": 0.5}}'}
    config, _ = load_config(None, env=env)
    entry = config.observability.prices["ollama:qwen3:8b"]
    assert (entry.input, entry.output, entry.cache_read) == (0, 0.5, None)
    bad = {"OSTINATO_OBSERVABILITY__PRICES": '{"x:y": {"input": -1, "output": 1}}'}
    with pytest.raises(ConfigError, match=r"observability\.prices"):
        load_config(None, env=bad)


def test_a_model_without_a_price_has_no_cost() -> None:
    assert prices.cost("ollama:qwen3:8b", Usage(10, 10)) is None
    assert prices.price_of("openai-chat:gpt-4.1") == prices.BUILT_IN["openai:gpt-4.1"]
