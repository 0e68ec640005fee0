"""Two servers on one SQLite file (issue 24): two runtimes, each with its own store
connection and lease and no relay between them (two ``ostinato serve`` processes, not
``--workers``). One turn per conversation all the same: the conversation is held in the
store. Before, without a relay nothing held it: both ran turns of one conversation at
once and answered each other's calls. A decision or a message that reaches the other
server is read by the turn that waits for the approval (it re-reads it)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ostinato.approvals import ApprovalPolicy
from ostinato.bus import LocalBus
from ostinato.leases import Lease
from ostinato.models.base import Model
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.store.sql.sqlite import SQLiteStore
from ostinato.tools.registry import ToolRegistry
from tests.server.people import GatedModel, deploy_tool


async def _server(path: Path, model: Model, **options: Any) -> Runtime:
    runtime = Runtime(await SQLiteStore.open(path), model=model, bus=LocalBus(), **options)
    runtime.lease = Lease(runtime.store)  # type: ignore[arg-type]
    await runtime.recover()
    return runtime


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[tuple[Runtime, Runtime, GatedModel]]:
    model = GatedModel()
    a = await _server(tmp_path / "one.db", model)
    b = await _server(tmp_path / "one.db", model)
    yield a, b, model
    model.open_all()
    await a.close()
    await b.close()


async def test_a_message_to_the_other_server_waits_for_the_running_turn(
    pair: tuple[Runtime, Runtime, GatedModel],
) -> None:
    a, b, model = pair
    conversation = await a.create_conversation()
    first = await a.start_turn(conversation.id, "long one")
    submission = await b.submit(conversation.id, "after it")
    assert submission.queued is not None  # stored in the queue: nothing accepted is lost
    await asyncio.sleep(0.3)
    assert not submission.started.done()  # waits for a's turn, never beside it
    model.open(1)
    await asyncio.wait_for(first.result(), 10)
    second = await asyncio.wait_for(submission.handle(), 10)
    model.open(2)
    await asyncio.wait_for(second.result(), 10)
    earlier, later = await b.store.list_turns(conversation.id)
    assert earlier.finished_at is not None and later.started_at >= earlier.finished_at
    assert (earlier.holder, later.holder) == (a.holder, b.holder)


async def test_an_approval_decided_on_the_other_server_reaches_the_waiting_turn(
    tmp_path: Path,
) -> None:
    runs: list[str] = []
    model = ScriptedModel([tool_step(("deploy", {"target": "prod"})), text_step("Deployed.")])
    options: dict[str, Any] = {
        "tools": ToolRegistry([deploy_tool(runs)]),
        "approvals": ApprovalPolicy(timeout=60),
    }
    a = await _server(tmp_path / "one.db", model, **options)
    b = await _server(tmp_path / "one.db", model, **options)
    try:
        conversation = await a.create_conversation()
        watching = a.bus.subscribe(conversation.id)
        first = await a.start_turn(conversation.id, "ship it")
        async with asyncio.timeout(10):
            while (frame := await watching.get()).type != "approval.requested":
                pass
        await b.decide(conversation.id, frame.approval_id, approve=True)  # type: ignore[attr-defined]
        result = await asyncio.wait_for(first.result(), 10)  # a re-read it: no relay needed
        assert result.stop_reason == "end_turn" and runs == ["prod"]
    finally:
        await a.close()
        await b.close()
