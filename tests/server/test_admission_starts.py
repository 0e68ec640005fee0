"""How many turns one process begins at once (``Admission.beginning``,
``server.max_starting``): a burst of inputs begins a few turns at a time, in the order
they came, and ``/healthz`` says how many are being begun."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from ostinato.admission import Admission
from ostinato.config import ServerSection
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.base import Conversation, HistoryWindow
from ostinato.store.memory import MemoryStore
from tests.server.people import GatedModel, client_for, eventually


async def test_at_most_starts_are_begun_at_once_in_the_order_they_came() -> None:
    admission = Admission(starts=2)
    let_go = {name: asyncio.Event() for name in "abcd"}
    began: list[str] = []

    async def begin(name: str) -> None:
        async with admission.beginning():
            began.append(name)
            await let_go[name].wait()

    tasks = [asyncio.ensure_future(begin(name)) for name in "abcd"]
    await eventually(lambda: _true(began == ["a", "b"]))
    await asyncio.sleep(0.02)  # the others wait: nothing more begins on its own
    assert began == ["a", "b"] and admission.starting == 2
    let_go["b"].set()
    await eventually(lambda: _true(began == ["a", "b", "c"]))
    let_go["a"].set()
    await eventually(lambda: _true(began == ["a", "b", "c", "d"]))
    let_go["c"].set()
    let_go["d"].set()
    await asyncio.gather(*tasks)
    assert admission.starting == 0


async def test_no_bound_begins_every_turn_at_once() -> None:
    admission = Admission()
    inside = 0
    let_go = asyncio.Event()

    async def begin() -> None:
        nonlocal inside
        async with admission.beginning():
            inside += 1
            await let_go.wait()

    tasks = [asyncio.ensure_future(begin()) for _ in range(5)]
    await eventually(lambda: _true(inside == 5))
    assert admission.starting == 5
    let_go.set()
    await asyncio.gather(*tasks)
    assert admission.starting == 0


class SlowHistory(MemoryStore):
    """A store whose first read of each conversation and its history (the one a turn's
    beginning makes) waits until the test lets it through (its gate, or ``let_all``)."""

    def __init__(self) -> None:
        super().__init__()
        self.reading: list[str] = []
        self.gates: dict[str, asyncio.Event] = {}
        self.open = False

    async def conversation_and_window(
        self, conversation_id: str, *, limit: int
    ) -> tuple[Conversation | None, HistoryWindow]:
        if conversation_id not in self.gates:
            self.gates[conversation_id] = gate = asyncio.Event()
            self.reading.append(conversation_id)
            if not self.open:
                await gate.wait()
        return await super().conversation_and_window(conversation_id, limit=limit)

    def let_all(self) -> None:
        self.open = True
        for gate in self.gates.values():
            gate.set()


@pytest.mark.parametrize("starts", [1, None])
async def test_a_burst_of_messages_begins_its_turns_within_the_bound(starts: int | None) -> None:
    """Three new conversations' messages at once: with one place for beginning turns,
    one turn is begun at a time (the others wait to read their history), and ``/healthz``
    counts it; with no bound the three are begun together."""
    store, gated = SlowHistory(), GatedModel()
    runtime = Runtime(store, model=gated, seed_recall=False)
    runtime.admission = Admission(starts=starts)
    sent: list[asyncio.Future[Any]] = []
    try:
        cids = [(await runtime.create_conversation()).id for _ in range(3)]
        sent = [asyncio.ensure_future(runtime.submit(cid, "hello")) for cid in cids]
        expected = 1 if starts == 1 else 3
        await eventually(lambda: _true(len(store.reading) == expected))
        await asyncio.sleep(0.02)  # time for any other to begin, were it let
        assert len(store.reading) == expected
        async with client_for(create_app(runtime, store_name="test")) as client:
            assert await _beginning(client) == expected
        if starts == 1:  # the first one's history comes: the next one is begun
            store.gates[store.reading[0]].set()
            await eventually(lambda: _true(len(store.reading) == 2))
        store.let_all()
        await asyncio.gather(*sent)
        await eventually(lambda: _true(gated.calls == 3))
        assert runtime.admission.starting == 0
    finally:
        store.let_all()
        gated.open_all()
        await asyncio.gather(*sent, return_exceptions=True)
        await runtime.close()


def test_serve_begins_32_turns_at_once_unless_told() -> None:
    assert ServerSection().max_starting == 32
    assert ServerSection.model_validate({"max_starting": None}).max_starting is None
    with pytest.raises(ValueError, match="max_starting"):
        ServerSection.model_validate({"max_starting": 0})


async def _beginning(client: httpx.AsyncClient) -> int:
    health = (await client.get("/healthz")).json()
    return int(health["load"]["turns_beginning"])


async def _true(value: bool) -> bool:
    return value
