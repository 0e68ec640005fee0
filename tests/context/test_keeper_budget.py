"""``ContextKeeper.over_budget`` keeps each model's budget for the turn: asked of two
models in turn, each request is held against its own model's window, every time."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ostinato.context.catalog import ContextCatalog
from ostinato.context.compaction import Compactor
from ostinato.context.keeper import ContextKeeper
from ostinato.messages import Message, TextBlock
from ostinato.models.base import ModelRequest


def _host(model: str, history: list[Message]) -> Any:
    return SimpleNamespace(model=SimpleNamespace(name=model), history=history, prior_count=0)


def test_each_model_is_held_to_its_own_window() -> None:
    catalog = ContextCatalog({"small": 2_000, "large": 100_000})
    keeper = ContextKeeper(Compactor(catalog=catalog), reserve=500)
    history = [Message("user", (TextBlock("word " * 2_000),), id="keeper-budget-1")]
    request = ModelRequest(system="", messages=tuple(history), tools=())
    for _ in range(2):  # the second round reads the kept budgets
        assert keeper.over_budget(_host("small", history), request)
        assert not keeper.over_budget(_host("large", history), request)
    assert keeper.budget(SimpleNamespace(name="small")) == 1_500  # type: ignore[arg-type]
