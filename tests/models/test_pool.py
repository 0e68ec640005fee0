"""The bound on one provider endpoint's model calls at once (``ostinato.models.pool``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import pytest

from ostinato.messages import user_text
from ostinato.models import ProviderSettings, create_model
from ostinato.models.base import ModelEvent, ModelRequest, Stop, TextDelta
from ostinato.models.pool import Pooled, pool_for, pooled

REQUEST = ModelRequest("", [user_text("Hi")])


class Gate:
    """A model whose calls each wait for their gate; counts the calls streaming."""

    name = "gate:model"

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.inside = 0
        self.most = 0

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        self.inside += 1
        self.most = max(self.most, self.inside)
        try:
            yield TextDelta("a")
            await self.open.wait()
            yield Stop("end_turn")
        finally:
            self.inside -= 1


async def drain(model: Pooled) -> list[ModelEvent]:
    return [event async for event in model.stream(REQUEST)]


async def test_calls_past_the_limit_wait_and_a_cancelled_one_gives_its_place_back() -> None:
    gate = Gate()
    model = pooled(gate, "test a", 2)
    assert isinstance(model, Pooled) and model.name == "gate:model"
    calls = [asyncio.ensure_future(drain(model)) for _ in range(5)]
    for _ in range(20):
        await asyncio.sleep(0)
    pool = pool_for("test a", 2)
    assert (gate.inside, pool.running, pool.waiting) == (2, 2, 3)
    calls[3].cancel()  # one waiting is cancelled: it leaves the line, takes nothing
    calls[0].cancel()  # one streaming is cancelled: its place goes to the next
    for _ in range(20):
        await asyncio.sleep(0)
    assert (gate.inside, pool.running, pool.waiting) == (2, 2, 1)
    gate.open.set()
    done = await asyncio.gather(*calls, return_exceptions=True)
    assert [isinstance(d, asyncio.CancelledError) for d in done] == [
        True,
        False,
        False,
        True,
        False,
    ]
    assert gate.most == 2 and (pool.running, pool.waiting) == (0, 0)


async def test_models_of_one_endpoint_share_its_pool_and_others_do_not() -> None:
    settings = ProviderSettings(max_requests=1)
    env = {"OLLAMA_BASE_URL": "http://box:11434/v1"}
    one = create_model("ollama:a", env=env, settings=settings)
    two = create_model("ollama:b", env=env, settings=settings)
    own = create_model("ollama:a", env=env, settings=settings, base_url="http://mine/v1")
    assert isinstance(one, Pooled) and isinstance(two, Pooled) and isinstance(own, Pooled)
    assert pool_for(one.endpoint, 1) is pool_for(two.endpoint, 1)
    assert pool_for(own.endpoint, 1) is not pool_for(one.endpoint, 1)
    unbounded = create_model("ollama:a", env=env, settings=ProviderSettings(max_requests=0))
    assert not isinstance(unbounded, Pooled)
    assert not isinstance(create_model("offline:ostinato", settings=settings), Pooled)


@pytest.mark.parametrize("limit", [1, 3])
async def test_the_wrapped_adapter_still_answers(limit: int) -> None:
    gate = Gate()
    gate.open.set()
    model = pooled(gate, f"test answers {limit}", limit)
    assert isinstance(model, Pooled)
    events = await drain(model)
    assert [type(e).__name__ for e in events] == ["TextDelta", "Stop"]
