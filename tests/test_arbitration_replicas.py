"""One turn per conversation across servers (ostinato.holds): two runtimes on one
PostgreSQL database, each with its lease, bus and relay. A message posted to B while A
runs the conversation's turn is queued in the store and runs on B after A's turn, never
beside it; 'reject' refuses it; 'supersede' cancels A's turn first."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa

from ostinato.approvals import ApprovalPolicy
from ostinato.errors import Conflict
from ostinato.leases import Lease
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.store.sql.postgres import PostgresStore
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry
from tests.server.people import GatedModel, deploy_tool
from tests.store.conftest import open_postgres, postgres_url
from tests.test_fanout import Server

__all__ = ["postgres_url"]


@pytest.fixture
async def pair(postgres_url: sa.URL) -> AsyncIterator[tuple[Server, Server, GatedModel]]:
    model = GatedModel()
    a = Server(await open_postgres(postgres_url), model)
    b = Server(await PostgresStore.open(postgres_url), model)
    for server in (a, b):
        await server.start()
        server.runtime.lease = Lease(server.store)
        await server.runtime.recover()
    yield a, b, model
    model.open_all()
    await a.runtime.close()
    await b.runtime.close()


async def test_a_message_posted_to_b_while_a_runs_waits_and_then_runs_on_b(
    pair: tuple[Server, Server, GatedModel],
) -> None:
    a, b, model = pair
    conversation = await a.runtime.create_conversation()
    first = await a.runtime.start_turn(conversation.id, "long one")
    submission = await b.runtime.submit(conversation.id, "after it")
    assert submission.queued is not None  # stored in the queue: nothing accepted is lost
    assert not submission.started.done()  # waits for a's turn
    model.open(1)
    await asyncio.wait_for(first.result(), 10)
    second = await asyncio.wait_for(submission.handle(), 10)
    model.open(2)
    await asyncio.wait_for(second.result(), 10)
    earlier, later = await b.store.list_turns(conversation.id)
    assert earlier.finished_at is not None and later.started_at >= earlier.finished_at
    assert later.holder == b.runtime.holder and earlier.holder == a.runtime.holder


async def test_reject_and_supersede_reach_the_turn_on_the_other_server(
    pair: tuple[Server, Server, GatedModel],
) -> None:
    a, b, model = pair
    conversation = await a.runtime.create_conversation()
    first = await a.runtime.start_turn(conversation.id, "long one")
    with pytest.raises(Conflict):
        await b.runtime.submit(conversation.id, "not now", policy="reject")
    submission = await b.runtime.submit(conversation.id, "instead", policy="supersede")
    assert first.task.done()  # a's turn was cancelled and torn down first
    second = await asyncio.wait_for(submission.handle(), 10)
    model.open_all()
    await asyncio.wait_for(second.result(), 10)
    earlier, later = await b.store.list_turns(conversation.id)
    assert earlier.stop_reason == "cancelled" and later.stop_reason == "end_turn"


async def test_a_message_on_b_dismisses_the_approval_a_turn_on_a_waits_for(
    postgres_url: sa.URL,
) -> None:
    runs: list[str] = []
    model = ScriptedModel(
        [tool_step(("deploy", {"target": "prod"})), text_step("Not deployed."), text_step("Ok.")]
    )
    options: dict[str, Any] = {
        "tools": ToolRegistry([deploy_tool(runs)]),
        "approvals": ApprovalPolicy(timeout=60),
    }
    a = Server(await open_postgres(postgres_url), model, **options)
    b = Server(await PostgresStore.open(postgres_url), model, **options)
    for server in (a, b):
        await server.start()
        server.runtime.lease = Lease(server.store)
        await server.runtime.recover()
    try:
        conversation = await a.runtime.create_conversation()
        there = b.runtime.bus.subscribe(conversation.id)  # the only surface: on b
        first = await a.runtime.start_turn(conversation.id, "ship it")
        async with asyncio.timeout(10):
            while (await there.get()).type != "approval.requested":
                pass
        submission = await b.runtime.submit(conversation.id, "no, wait")  # typed instead
        await asyncio.wait_for(first.result(), 10)  # a's turn went on without the call
        second = await asyncio.wait_for(submission.handle(), 10)
        await asyncio.wait_for(second.result(), 10)
        assert runs == []
        (approval,) = await b.store.list_approvals(conversation.id)
        assert approval.ending is not None and approval.ending.value == "DISMISSED"
    finally:
        await a.runtime.close()
        await b.runtime.close()


async def test_a_message_steered_on_b_reaches_the_turn_running_on_a(
    postgres_url: sa.URL,
) -> None:
    """The turn on A reads the store at its step boundary, so it takes a message sent to
    B with 'steer' (B's worker knew of it, A's never did) before its next model call; the
    sender on B follows that turn to its end."""
    model = ScriptedModel([tool_step(("deploy", {"target": "staging"})), text_step("Done.")])
    started, release = asyncio.Event(), asyncio.Event()

    async def deploy(target: str) -> str:
        """Deploy to a target.

        Args:
            target: Where to deploy.
        """
        started.set()
        await release.wait()
        return f"deployed {target}"

    tool = function_tool(deploy)
    a = Server(await open_postgres(postgres_url), model, tools=ToolRegistry([tool]))
    b = Server(await PostgresStore.open(postgres_url), model, tools=ToolRegistry([tool]))
    for server in (a, b):
        await server.start()
        server.runtime.lease = Lease(server.store)
        await server.runtime.recover()
    try:
        conversation = await a.runtime.create_conversation()
        first = await a.runtime.start_turn(conversation.id, "ship it")
        await asyncio.wait_for(started.wait(), 10)
        steered = await b.runtime.submit(conversation.id, "to staging only", policy="steer")
        assert steered.queued is not None and steered.queued.steer
        release.set()
        result = await asyncio.wait_for(first.result(), 10)
        assert result.stop_reason == "end_turn"
        last = model.requests[1].messages[-1]
        assert (last.role, last.text) == ("user", "to staging only")
        assert await b.store.list_queued(conversation.id) == []
        (turn,) = await b.store.list_turns(conversation.id)
        assert turn.holder == a.runtime.holder
        joined = await asyncio.wait_for(steered.handle(), 10)  # its sender on b follows a's turn
        assert joined.run_id == first.run_id
        followed = await asyncio.wait_for(joined.result(), 10)
        assert followed.stop_reason == "end_turn"
        assert [m.text for m in followed.messages] == ["to staging only", "Done."]
    finally:
        await a.runtime.close()
        await b.runtime.close()
