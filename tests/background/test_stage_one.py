"""Stage one's approvals: with nobody watching the conversation a schedule serves, a call
that needs consent ends UNREACHABLE and the run goes on; with a surface open there, the
card is asked there (carrying stage one's run_id) and the person's answer lets the call
run. Background conversations are left out of the owner's listing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from ostinato.approvals import ApprovalPolicy, Ending
from ostinato.background.firer import Firer
from ostinato.background.schedules import Schedules
from ostinato.background.stage_one import conversation_id
from ostinato.frames import ApprovalRequested
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.memory import MemoryStore
from ostinato.store.schedules import Schedule
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
ran: list[str] = []


async def book_table(place: str) -> str:
    """Book a table.

    Args:
        place: Where.
    """
    ran.append(place)
    return f"booked at {place}"


@pytest.fixture
async def runtime() -> AsyncIterator[Runtime]:
    ran.clear()
    tools = ToolRegistry([function_tool(book_table, category="action", risk="write")])
    made = Runtime(MemoryStore(), model=ScriptedModel(), tools=tools, approvals=ApprovalPolicy())
    yield made
    await made.close()


async def fire(runtime: Runtime, model: ScriptedModel) -> tuple[str, list[Schedule]]:
    """A prompt scheduled in a new conversation of ann's, fired; what was claimed."""
    runtime._model = model
    cid = (await runtime.create_conversation(owner="ann")).id
    now = [T0]
    schedules = Schedules(runtime.store, clock=lambda: now[0])
    await schedules.create("ann", cid, "in 1 minute", "Book dinner")
    now[0] += timedelta(minutes=1)
    return cid, await Firer(runtime, schedules, "h1").tick()


async def test_nobody_watching_makes_an_approval_unreachable(runtime: Runtime) -> None:
    model = ScriptedModel()
    model.add(tool_step(("book_table", {"place": "Chez Nous"})), text_step("Could not book."))
    model.add(text_step("I could not book dinner."))
    cid, _ = await fire(runtime, model)
    (approval,) = await runtime.store.list_approvals(cid)
    assert approval.ending == Ending.UNREACHABLE and ran == []
    assert approval.turn_id != (await runtime.store.list_turns(cid))[0].id  # stage one's


async def test_a_surface_open_gets_the_card_and_its_answer_runs_the_call(runtime: Runtime) -> None:
    model = ScriptedModel()
    model.add(tool_step(("book_table", {"place": "Chez Nous"})), text_step("Booked."))
    model.add(text_step("Dinner is booked."))
    runtime._model = model
    cid = (await runtime.create_conversation(owner="ann")).id
    watching = runtime.bus.subscribe(cid)
    now = [T0]
    schedules = Schedules(runtime.store, clock=lambda: now[0])
    made = await schedules.create("ann", cid, "in 1 minute", "Book dinner")
    now[0] += timedelta(minutes=1)
    ticking = asyncio.create_task(Firer(runtime, schedules, "h1").tick())
    card = await anext(f async for f in watching if isinstance(f, ApprovalRequested))
    (stage_one,) = await runtime.store.list_turns(conversation_id(made))
    assert card.run_id == stage_one.run_id and card.tool == "book_table"
    await runtime.decide(cid, card.approval_id, approve=True)
    await ticking
    assert ran == ["Chez Nous"]
    stored = await schedules.store.schedule(made.id)
    assert stored is not None and (stored.state, stored.result) == ("delivered", "Booked.")
    watching.close()


async def test_background_conversations_are_not_listed(runtime: Runtime) -> None:
    model = ScriptedModel()
    model.add(text_step("Done."), text_step("All done."))
    cid, (fired,) = await fire(runtime, model)
    app = create_app(runtime)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        listed = (await client.get("/v1/conversations")).json()["conversations"]
        assert [c["id"] for c in listed] == [cid]
        background = await client.get(f"/v1/conversations/{conversation_id(fired)}/messages")
        assert background.status_code == 200  # the owner reads it by id
    await app.state.ostinato.aclose()


async def test_no_after_turn_work_reads_the_machinerys_rows_as_the_persons() -> None:
    seen: list[str] = []

    async def after_turn(**kw: object) -> None:
        seen.append(str(kw["user"]))

    model = ScriptedModel([text_step("Plan: rest."), text_step("Rest today."), text_step("Hi")])
    made = Runtime(MemoryStore(), model=model, after_turn=after_turn)
    try:
        cid, _ = await fire(made, model)
        await made.settle(5)
        assert seen == []  # neither stage one's row nor the hidden hand-off is the person's
        await made.run_turn(cid, "hello")
        await made.settle(5)
        assert len(seen) == 1
    finally:
        await made.close()
