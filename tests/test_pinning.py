"""Agents are versioned values (``ostinato.pinning``, ``ostinato.versions``): a reload that
changes an agent makes a new version; a conversation keeps the version it began with (an
approval that waits across the reload runs under it, and so do its later turns) until it
is moved; a move that would leave a waiting call without its tool is refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from ostinato.cli.timeline import turn_lines
from ostinato.config import load_config
from ostinato.deployment import Deployment, build_runtime
from ostinato.errors import Conflict
from ostinato.frames import ApprovalRequested, TurnStarted
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.reload import Reloader
from ostinato.server import create_app
from ostinato.store.memory import MemoryStore
from ostinato.versions import AgentVersion, move_refusal

FILE = """
[memory]
extract_facts = false

[data]
titles = "off"

[[agents]]
id = "assistant"
prompt = "{prompt}"
tools = {tools}
"""
WRITE = ("write_file", {"path": "a.txt", "content": "x"})


def write(path: Path, prompt: str, tools: str = '["write_file"]') -> None:
    path.write_text(FILE.format(prompt=prompt, tools=tools))


async def deployed(path: Path) -> tuple[Deployment, Reloader, ScriptedModel]:
    config, _ = load_config(path, env={})
    model = ScriptedModel(name="scripted:model")
    deployment = await build_runtime(
        config, MemoryStore(), default_model=model, default_id="scripted:model",
        data_dir=path.parent / "data", env={},
    )  # fmt: skip
    return deployment, Reloader(deployment, config, path, env={}), model


async def approval_of(frames: object) -> ApprovalRequested:
    async for frame in frames:  # type: ignore[attr-defined]
        if isinstance(frame, ApprovalRequested):
            return frame
    raise AssertionError("no approval.requested")


async def test_a_reload_while_an_approval_waits_leaves_the_conversation_on_its_version(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ostinato.toml"
    write(path, "Old prompt.")
    deployment, reloader, model = await deployed(path)
    runtime = deployment.runtime
    assert runtime.pinning is not None and runtime.pinning.current["assistant"].number == 1
    cid = (await runtime.create_conversation()).id
    watcher = runtime.bus.subscribe(cid)
    model.add(tool_step(WRITE), text_step("written"))
    task = asyncio.ensure_future(runtime.run_turn(cid, "write it"))
    frame = await asyncio.wait_for(approval_of(watcher), 5)
    write(path, "New prompt.")  # reloaded while the approval waits
    outcome = await reloader.reload()
    assert outcome.applied and runtime.pinning.current["assistant"].number == 2
    await runtime.decide(cid, frame.approval_id, approve=True)
    assert (await asyncio.wait_for(task, 5)).stop_reason == "end_turn"
    assert "Old prompt." in model.requests[-1].system  # the call ran under version 1
    model.add(text_step("still old"))
    await runtime.run_turn(cid, "and now?")  # a later turn keeps the version too
    assert "Old prompt." in model.requests[-1].system
    turns = await runtime.store.list_turns(cid)
    assert [t.metrics["route"]["version"] for t in turns] == [1, 1]
    other = (await runtime.create_conversation()).id  # a new conversation: the new version
    model.add(text_step("new"))
    await runtime.run_turn(other, "hello")
    assert "New prompt." in model.requests[-1].system
    await runtime.close()


async def test_moving_a_conversation_and_refusing_a_move_that_strands_a_call(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ostinato.toml"
    write(path, "Old prompt.")
    deployment, reloader, model = await deployed(path)
    runtime = deployment.runtime
    app = create_app(runtime)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        cid = (await client.post("/v1/conversations")).json()["id"]
        model.add(text_step("one"))
        await runtime.run_turn(cid, "hi")
        write(path, "New prompt.", tools="[]")  # version 2 has no write_file
        assert (await reloader.reload()).applied
        agents = (await client.get(f"/v1/conversations/{cid}/agents")).json()["agents"]
        assert agents == [{"agent": "assistant", "version": 1, "latest": 2}]
        watcher = runtime.bus.subscribe(cid)
        model.add(tool_step(WRITE))
        task = asyncio.ensure_future(runtime.run_turn(cid, "write it"))
        frame = await asyncio.wait_for(approval_of(watcher), 5)
        url = f"/v1/conversations/{cid}/agents"
        refused = await client.patch(url, json={"versions": {"assistant": "latest"}})
        assert refused.status_code == 409
        assert "'write_file'" in refused.json()["error"]["message"]
        assert (await client.patch(url, json={"versions": {"assistant": 9}})).status_code == 422
        await runtime.decide(cid, frame.approval_id, approve=False)
        model.add(text_step("declined, fine"))
        await asyncio.wait_for(task, 5)
        moved = await client.patch(url, json={"versions": {"assistant": "latest"}})
        assert moved.status_code == 200, moved.text
        assert moved.json()["agents"] == [{"agent": "assistant", "version": None, "latest": 2}]
        fresh = runtime.bus.subscribe(cid)
        model.add(text_step("new"))
        await runtime.run_turn(cid, "and now?")
        assert "New prompt." in model.requests[-1].system
        announced = await asyncio.wait_for(_started(fresh), 5)
        assert announced.agent_version == 2  # turn.started names the version
    await app.state.ostinato.aclose()
    await runtime.close()


async def _started(frames: object) -> TurnStarted:
    async for frame in frames:  # type: ignore[attr-defined]
        if isinstance(frame, TurnStarted):
            return frame
    raise AssertionError("no turn.started")


def test_the_move_rule() -> None:
    with_tools = AgentVersion("a", 3, "h", {"tools": ["shell"]})
    every_tool = AgentVersion("a", 4, "h", {"tools": None})
    assert move_refusal([], with_tools) is None  # nothing waits
    assert move_refusal(["shell"], with_tools) is None
    assert move_refusal(["shell"], every_tool) is None
    refusal = move_refusal(["write_file", "shell"], with_tools)
    assert refusal is not None and "'write_file'" in refusal and "version 3 of 'a'" in refusal


async def test_the_timeline_replay_and_traces_name_the_version(tmp_path: Path) -> None:
    from tests.observe.test_traces import attrs, tracing

    path = tmp_path / "ostinato.toml"
    write(path, "Old prompt.")
    deployment, _, model = await deployed(path)
    runtime = deployment.runtime
    cid = (await runtime.create_conversation()).id
    model.add(text_step("traced"))
    spans = tracing()
    exporter = next(spans)
    try:
        await runtime.run_turn(cid, "hello")
        turn_span = next(
            s for s in exporter.get_finished_spans() if s.name == "invoke_agent assistant"
        )
        assert attrs(turn_span)["ostinato.agent.version"] == 1
    finally:
        spans.close()
    (turn,) = await runtime.store.list_turns(cid)
    assert turn.metrics["route"]["version"] == 1  # GET .../turns/{id} returns it
    assert "assistant v1" in next(turn_lines(1, turn))
    await runtime.close()


TWO = """
[memory]
extract_facts = false

[data]
titles = "off"

[[agents]]
id = "assistant"
prompt = "Assistant prompt."
default = true
"""
HELPER = """
[[agents]]
id = "helper"
prompt = "Helper prompt."
tools = ["ask_user"]
"""
ASK = ("ask_user", {"question": "Which one?"}, "card-1")


async def test_a_card_answered_after_its_agent_was_removed_runs_under_its_pinned_version(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ostinato.toml"
    path.write_text(TWO + HELPER)
    deployment, reloader, model = await deployed(path)
    runtime = deployment.runtime
    cid = (await runtime.create_conversation()).id
    model.add(tool_step(ASK))
    paused = await runtime.run_turn(cid, "help", skill="helper")
    assert paused.stop_reason == "paused"
    path.write_text(TWO)  # the helper is removed while its card waits
    assert (await reloader.reload()).applied and runtime.router.get("helper") is None
    model.add(text_step("the first"))
    watcher = runtime.bus.subscribe(cid)
    handle = await runtime.answer_card(cid, "card-1", "the first one")
    assert (await _started(watcher)).agent_version == 1
    assert (await handle.result()).stop_reason == "end_turn"
    assert "Helper prompt." in model.requests[-1].system  # not the default agent's


async def test_a_card_of_a_removed_agent_pinned_to_no_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ostinato.toml"
    path.write_text(TWO + HELPER)
    deployment, reloader, model = await deployed(path)
    runtime = deployment.runtime
    cid = (await runtime.create_conversation()).id
    model.add(tool_step(ASK))
    assert (await runtime.run_turn(cid, "help", skill="helper")).stop_reason == "paused"
    assert runtime.pinning is not None
    await runtime.pinning.store.pin_versions(cid, {"helper": None}, move=True)  # the latest
    path.write_text(TWO)
    assert (await reloader.reload()).applied
    with pytest.raises(Conflict, match="no longer has"):
        await runtime.answer_card(cid, "card-1", "the first one")
    assert not model.requests[1:], "no other agent carried it on"


async def test_a_conversation_is_pinned_when_it_is_made(tmp_path: Path) -> None:
    """A reload between a conversation's creation and its first turn: the turn runs the
    version current when the conversation was made."""
    path = tmp_path / "ostinato.toml"
    write(path, "Old prompt.")
    deployment, reloader, model = await deployed(path)
    runtime = deployment.runtime
    cid = (await runtime.create_conversation()).id
    write(path, "New prompt.")
    assert (await reloader.reload()).applied
    model.add(text_step("hello"))
    await runtime.run_turn(cid, "hi")
    assert "Old prompt." in model.requests[-1].system
    model.add(text_step("hello"))
    await runtime.run_turn((await runtime.create_conversation()).id, "hi")
    assert "New prompt." in model.requests[-1].system


async def test_a_new_conversation_and_its_pins_are_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ostinato.toml"
    write(path, "Old prompt.")
    deployment, _reloader, _model = await deployed(path)
    runtime = deployment.runtime
    writes: list[tuple[Any, ...]] = []
    write_ops = runtime.store.write

    async def counted(*ops: Any) -> list[Any]:
        writes.append(ops)
        return await write_ops(*ops)

    async def refused(*_: Any, **__: Any) -> None:
        raise AssertionError("pinned apart from the conversation's creation")

    monkeypatch.setattr(runtime.store, "write", counted)
    monkeypatch.setattr(runtime.store, "pin_versions", refused)
    cid = (await runtime.create_conversation()).id
    assert len(writes) == 1
    assert runtime.pinning is not None
    pins = await runtime.pinning.store.conversation_versions(cid)
    assert pins and pins == {a: v.number for a, v in runtime.pinning.current.items()}
