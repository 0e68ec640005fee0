"""Hand-over at shutdown (``ostinato.handover``), in process: two runtimes on one
PostgreSQL database, each with its lease, bus and relay. A drains while its turn runs a
tool: the tool finishes on A, the JSON request waiting on A gets 503 ``handed_over``, and
B goes on with the same turn: one model call on A, one on B, the tool run once; the
after-turn work (a title, facts) runs once, on B, for the person's message; the spend
of A's part of the turn is charged by A as it hands over. Alone on its database, a
draining server hands nothing over (the turn ends by itself)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from ostinato.handover import handed
from ostinato.leases import Lease
from ostinato.messages import Message
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.observe import prices
from ostinato.server import create_app
from ostinato.spend.gate import SpendGate
from ostinato.spend.limits import Budgets
from ostinato.store.base import utcnow
from ostinato.store.sql.postgres import PostgresStore
from ostinato.tools.base import Tool
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry
from tests.server.people import client_for, eventually
from tests.store.conftest import open_postgres, postgres_url
from tests.test_fanout import Server

__all__ = ["postgres_url"]


class Slow:
    """A tool that runs until the test lets it finish."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.go = asyncio.Event()
        self.runs = 0

    def tool(self) -> Tool:
        async def slow_job(name: str) -> str:
            """Run a slow job.

            Args:
                name: The job.
            """
            self.runs += 1
            self.started.set()
            await self.go.wait()
            return f"done {name}"

        return function_tool(slow_job, risk="read", idempotent=False)


class AfterTurns:
    """After-turn work that records each call: (turn id, the person's text, the answer)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str | None]] = []

    async def __call__(
        self, *, turn_id: str, user: Message, answer: Message | None, **_: Any
    ) -> None:
        self.calls.append((turn_id, user.text, answer.text if answer else None))


def script() -> ScriptedModel:
    return ScriptedModel([tool_step(("slow_job", {"name": "j"})), text_step("finished")])


async def _server(store: PostgresStore, model: ScriptedModel, slow: Slow) -> Server:
    server = Server(store, model, tools=ToolRegistry([slow.tool()]))
    await server.start()
    server.runtime.lease = Lease(server.store)
    await server.runtime.recover()
    return server


@pytest.fixture
async def pair(postgres_url: sa.URL) -> AsyncIterator[tuple[Server, Server, ScriptedModel, Slow]]:
    model, slow = script(), Slow()
    a = await _server(await open_postgres(postgres_url), model, slow)
    b = await _server(await PostgresStore.open(postgres_url), model, slow)
    yield a, b, model, slow
    slow.go.set()
    await a.runtime.close()
    await b.runtime.close()


async def test_a_draining_server_hands_its_turn_to_the_other_at_the_next_step(
    pair: tuple[Server, Server, ScriptedModel, Slow],
) -> None:
    a, b, model, slow = pair
    cid = (await a.runtime.create_conversation()).id
    a.runtime.after_turn, b.runtime.after_turn = after_a, after_b = AfterTurns(), AfterTurns()
    async with client_for(create_app(a.runtime)) as client:
        waiting = asyncio.ensure_future(
            client.post(f"/v1/conversations/{cid}/turns", json={"text": "go"})
        )
        await asyncio.wait_for(slow.started.wait(), 10)
        draining = asyncio.ensure_future(a.runtime.drain(30))
        await eventually(lambda: _true(a.runtime.handing.is_set()))
        slow.go.set()  # the tool in flight finishes first, on A
        answer: httpx.Response = await asyncio.wait_for(waiting, 10)
        await asyncio.wait_for(draining, 10)
    assert answer.status_code == 503 and answer.json()["error"]["code"] == "handed_over"
    [turn] = await b.store.list_turns(cid)
    assert handed(turn.holder) and turn.status == "running"
    await a.runtime.close()  # releases A's lease; B's sweep takes the turn over
    await b.runtime._sweep()
    await eventually(lambda: _finished(b, cid))
    [turn] = await b.store.list_turns(cid)
    assert turn.stop_reason == "end_turn" and turn.holder == b.runtime.holder
    assert slow.runs == 1 and len(model.requests) == 2  # nothing made twice
    rows = await b.store.list_messages(cid)
    assert [r.role for r in rows if not r.hidden] == ["user", "assistant", "tool", "assistant"]
    await b.runtime.settle(10)  # the after-turn work: once, where the turn ended
    assert after_a.calls == [] and after_b.calls == [(turn.id, "go", "finished")]


async def test_a_server_handing_a_turn_over_charges_its_calls_before_it_goes(
    pair: tuple[Server, Server, ScriptedModel, Slow],
) -> None:
    """The turn's tab (``loop.spending``) is A's: A charges it as it hands the turn over,
    before its lease is gone, and B's part of the turn goes on a tab of its own."""
    a, b, model, slow = pair
    prices.configure({model.name: prices.Price(input=1.0, output=1.0)})
    try:
        a.runtime.spend = SpendGate(a.store, Budgets())
        b.runtime.spend = SpendGate(b.store, Budgets())
        cid = (await a.runtime.create_conversation()).id
        handle = await a.runtime.start_turn(cid, "go")
        await asyncio.wait_for(slow.started.wait(), 10)
        draining = asyncio.ensure_future(a.runtime.drain(30))
        await eventually(lambda: _true(a.runtime.handing.is_set()))
        slow.go.set()
        with contextlib.suppress(Exception):  # the turn goes on elsewhere
            await asyncio.wait_for(handle.result(), 10)
        await asyncio.wait_for(draining, 10)
        day = utcnow().date().isoformat()
        assert await a.store.spend_holds() == []  # charged by A, not left for recovery
        [row] = await a.store.usage_rows(None, day, day)
        assert row.calls == 1
        await a.runtime.close()
        await b.runtime._sweep()
        await eventually(lambda: _finished(b, cid))
        assert len(await b.store.spend_holds()) == 1  # B's tab, kept for B's next turn
        await b.runtime.spend.parking.close_all()
        assert await b.store.spend_holds() == []
        [row] = await b.store.usage_rows(None, day, day)
        assert row.calls == 2 and len(model.requests) == 2
    finally:
        prices.configure({})


async def test_alone_on_its_database_a_draining_server_hands_nothing_over(
    postgres_url: sa.URL,
) -> None:
    model, slow = script(), Slow()
    a = await _server(await open_postgres(postgres_url), model, slow)
    try:
        cid = (await a.runtime.create_conversation()).id
        handle = await a.runtime.start_turn(cid, "go")
        await asyncio.wait_for(slow.started.wait(), 10)
        draining = asyncio.ensure_future(a.runtime.drain(30))
        slow.go.set()
        result = await asyncio.wait_for(handle.result(), 10)
        await asyncio.wait_for(draining, 10)
        assert result.stop_reason == "end_turn" and not a.runtime.handing.is_set()
    finally:
        await a.runtime.close()


async def _true(value: bool) -> bool:
    return value


async def _finished(server: Server, cid: str) -> bool:
    turns = await server.store.list_turns(cid)
    return bool(turns) and turns[0].status == "finished"
