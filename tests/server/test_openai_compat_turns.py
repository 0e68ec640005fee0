"""``POST /v1/chat/completions``: what an agent's ``[agents.completions]`` and the request
change, with the agents' settings read from an ``ostinato.toml`` (``surfaces_of``):
progress as ``reasoning_content`` (by the header, by the agent's config), the policy for a
message that arrives while a turn runs (``queue``, ``reject``), a typed message that
dismisses what waits, and the conversation named in a nested body field."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ostinato.agents import AgentConfig
from ostinato.approvals import ApprovalPolicy
from ostinato.config import load_config
from ostinato.filters import NO_FILTERS, OutputFilters
from ostinato.models.scripted import ScriptedModel, Step, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.server.surfaces import DEFAULTS, Surfaces, surfaces_of
from ostinato.skills import Router, Skill
from ostinato.store.base import Store
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.registry import ToolRegistry
from tests.server.people import client_for, deploy_tool, eventually, turn_ended

HEADER = "x-ostinato-conversation-id"
URL = "/v1/chat/completions"
TOML = """
[[agents]]
id = "plain"
default = true

[[agents]]
id = "talky"
[agents.completions]
progress = true
policy = "queue"

[[agents]]
id = "strict"
[agents.completions]
policy = "reject"
[agents.filters]
drop_phrases = ["Um, "]
[agents.filters.ai_sdk]
shorten_urls = true
[agents.filters.openai]
drop_phrases = ["Well, "]
"""


@pytest.fixture
def surfaces(tmp_path: Path) -> Surfaces:
    path = tmp_path / "ostinato.toml"
    path.write_text(TOML)
    config = load_config(path, env={})[0]
    return surfaces_of(config.agents, config.default_agent().id)


@pytest.fixture
async def runtime(store: Store, model: ScriptedModel) -> AsyncIterator[Runtime]:
    tools = ToolRegistry([deploy_tool([]), *builtin_tools()])
    skills = [Skill(name, AgentConfig(name=name)) for name in ("plain", "talky", "strict")]
    runtime = Runtime(
        store,
        model=model,
        tools=tools,
        router=Router(skills, default=skills[0]),
        approvals=ApprovalPolicy(timeout=60),
    )
    yield runtime
    await runtime.close()


@pytest.fixture
def app(runtime: Runtime, surfaces: Surfaces) -> FastAPI:
    return create_app(runtime, model_name="scripted:model", ping_interval=0.2, surfaces=surfaces)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(app) as client:
        yield client


def ask(*messages: str, **body: Any) -> dict[str, Any]:
    roles = ["user", "assistant"]
    said = [{"role": roles[i % 2], "content": m} for i, m in enumerate(messages)]
    return {"model": "ostinato", "messages": said, **body}


def deltas(response: httpx.Response, field: str) -> list[str]:
    events = [e for e in response.text.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    return [c["choices"][0]["delta"][field] for c in chunks if field in c["choices"][0]["delta"]]


def test_the_agents_of_the_config_file_become_the_surfaces_settings(surfaces: Surfaces) -> None:
    plain, talky, strict = (surfaces.of(name) for name in ("plain", "talky", "strict"))
    assert surfaces.of(None) == plain  # the default agent
    assert (plain.policy, plain.progress) == (DEFAULTS.policy, DEFAULTS.progress)
    assert plain.filters_for("openai") == plain.filters_for("ai_sdk") == NO_FILTERS
    assert (talky.policy, talky.progress) == ("queue", True)
    assert (strict.policy, strict.progress) == ("reject", False)
    # a surface's filters are the agent's, with the surface's own settings over them
    assert strict.filters_for("ai_sdk") == OutputFilters(drop_phrases=("Um, ",), shorten_urls=True)
    assert strict.filters_for("openai") == OutputFilters(drop_phrases=("Well, ",))
    assert surfaces.filters("openai")("strict") == strict.filters_for("openai")
    assert surfaces.of("nobody") == DEFAULTS


def calculated(model: ScriptedModel) -> None:
    model.add(tool_step(("calculator", {"expression": "2*7"})), text_step("It is 14."))


async def test_progress_is_reasoning_content_by_the_header_or_the_agents_config(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    for agent, header, shown in (
        ("plain", None, False),
        ("plain", "true", True),
        ("talky", None, True),  # [agents.completions] progress = true
        ("talky", "false", False),  # the request says no
    ):
        calculated(model)
        headers = {"x-ostinato-progress": header} if header else {}
        streamed = await client.post(
            URL, json=ask("2*7?", model=agent, stream=True), headers=headers
        )
        assert "".join(deltas(streamed, "content")) == "It is 14.", (agent, header)
        reasoning = deltas(streamed, "reasoning_content")
        if not shown:
            assert reasoning == [], (agent, header)
            continue
        assert reasoning[0] == "Running calculator.\n"
        assert reasoning[1].startswith("calculator finished: ok (") and len(reasoning) == 2
    calculated(model)
    whole = await client.post(URL, json=ask("2*7?", model="talky"))
    message = whole.json()["choices"][0]["message"]
    assert message["content"] == "It is 14."
    assert message["reasoning_content"].startswith("Running calculator.\ncalculator finished")


async def _second_while_first_runs(
    runtime: Runtime, client: httpx.AsyncClient, model: ScriptedModel, agent: str
) -> tuple[str, httpx.Response, httpx.Response]:
    model.add(Step(text_step("slow answer", chunks=20).events, delay=0.1), text_step("second"))
    cid = (await runtime.create_conversation()).id
    first = asyncio.create_task(
        client.post(URL, json=ask("slow", model=agent), headers={HEADER: cid})
    )
    await eventually(lambda: _running(runtime, cid))
    second = await client.post(
        URL, json=ask("slow", "", "next", model=agent), headers={HEADER: cid}
    )
    return cid, await first, second


async def _running(runtime: Runtime, cid: str) -> bool:
    return runtime.running(cid) is not None


async def test_with_policy_queue_a_message_waits_for_the_running_turn(
    runtime: Runtime, store: Store, client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    cid, first, second = await _second_while_first_runs(runtime, client, model, "talky")
    assert first.json()["choices"][0]["message"]["content"] == "slow answer"
    assert second.json()["choices"][0]["message"]["content"] == "second"
    await eventually(lambda: turn_ended(store, cid, 2))
    assert [t.stop_reason for t in await store.list_turns(cid)] == ["end_turn", "end_turn"]
    texts = [m.text for m in await store.list_messages(cid)]
    assert texts == ["slow", "slow answer", "next", "second"]


async def test_with_policy_reject_a_message_while_a_turn_runs_is_a_409(
    runtime: Runtime, store: Store, client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    cid, first, second = await _second_while_first_runs(runtime, client, model, "strict")
    assert second.status_code == 409, second.text
    error = second.json()["error"]
    assert error["type"] == "conflict_error" and error["message"]
    assert second.headers[HEADER] == cid
    assert first.json()["choices"][0]["message"]["content"] == "slow answer"
    assert [t.stop_reason for t in await store.list_turns(cid)] == ["end_turn"]
    assert [m.text for m in await store.list_messages(cid)] == ["slow", "slow answer"]
    model.add(text_step("now then"))  # the unused "second" step goes first
    assert (await client.post(URL, json=ask("x", model="strict"))).status_code == 200


async def test_other_text_dismisses_a_waiting_approval_and_is_a_new_message(
    store: Store, client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(tool_step(("deploy", {"target": "prod"}), text="Deploying."))
    first = await client.post(URL, json=ask("ship it"))
    cid = first.headers[HEADER]
    said = first.json()["choices"][0]["message"]["content"]
    assert "Waiting for your approval: deploy" in said
    model.add(text_step("Staging, then."))
    second = await client.post(
        URL, json=ask("ship it", said, "make it staging instead"), headers={HEADER: cid}
    )
    assert second.json()["choices"][0]["message"]["content"] == "Staging, then."
    approvals = (await client.get(f"/v1/conversations/{cid}/approvals")).json()["approvals"]
    assert [a["ending"] for a in approvals] == ["DISMISSED"]
    users = [m.text for m in await store.list_messages(cid) if m.role == "user"]
    assert users == ["ship it", "make it staging instead"]


async def test_other_text_dismisses_a_waiting_card(
    store: Store, client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(tool_step(("ask_user", {"question": "Which colour?", "options": ["red", "blue"]})))
    first = await client.post(URL, json=ask("paint the fence"))
    cid = first.headers[HEADER]
    said = first.json()["choices"][0]["message"]["content"]
    model.add(text_step("No fence, then."))
    second = await client.post(
        URL, json=ask("paint", said, "forget the fence"), headers={HEADER: cid}
    )
    assert second.json()["choices"][0]["message"]["content"] == "No fence, then."
    results = [b for m in await store.list_messages(cid) if m.role == "tool" for b in m.blocks]
    assert len(results) == 1 and "dismiss" in str(results[0]).lower()
    assert (await client.get(f"/v1/conversations/{cid}")).json()["state"] == "idle"


@pytest.mark.parametrize("field", ["custom_llm_extra_body", "ostinato"])
async def test_the_conversation_named_in_a_nested_field(
    client: httpx.AsyncClient, model: ScriptedModel, field: str
) -> None:
    model.add(text_step("A1"), text_step("A2"))
    cid = (await client.post(URL, json=ask("Q1"))).headers[HEADER]
    nested = {field: {"conversation_id": cid}}
    again = await client.post(URL, json=ask("Q1", "A1", "Q2", **nested))
    assert again.status_code == 200 and again.headers[HEADER] == cid
    rows = (await client.get(f"/v1/conversations/{cid}/messages")).json()["messages"]
    assert [r["blocks"][0]["text"] for r in rows] == ["Q1", "A1", "Q2", "A2"]  # none twice
    missing = await client.post(URL, json=ask("Q3", **{field: {"conversation_id": "nope"}}))
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"
    # the header comes first
    other = await client.post(URL, json=ask("Q3", **nested), headers={HEADER: "nope"})
    assert other.status_code == 404
