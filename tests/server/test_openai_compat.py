"""``POST /v1/chat/completions`` against the app in memory, with a scripted model: the
wire format (streamed and not), conversation continuity without duplicated rows, answers
typed to approvals and cards, filters, agents named by ``model``, instructions, errors."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ostinato.agents import AgentConfig
from ostinato.approvals import ApprovalPolicy
from ostinato.filters import OutputFilters
from ostinato.models.base import ModelRequest
from ostinato.models.scripted import ScriptedModel, Step, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.server.surfaces import AgentSurfaces, Surfaces
from ostinato.skills import Router, Skill
from ostinato.store.base import Store
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.registry import ToolRegistry
from tests.server.people import client_for, deploy_tool, eventually, turn_ended

HEADER = "x-ostinato-conversation-id"
URL = "/v1/chat/completions"


@pytest.fixture
async def runtime(store: Store, model: ScriptedModel) -> AsyncIterator[Runtime]:
    tools = ToolRegistry([deploy_tool([]), *builtin_tools()])
    router = Router(
        [
            Skill("assistant", AgentConfig(name="assistant")),
            Skill("coder", AgentConfig(name="coder", request_instructions=True), "Forge"),
        ]
    )
    runtime = Runtime(
        store, model=model, tools=tools, router=router, approvals=ApprovalPolicy(timeout=60)
    )
    yield runtime
    await runtime.close()


@pytest.fixture
def app(runtime: Runtime) -> FastAPI:
    surfaces = Surfaces(
        {"coder": AgentSurfaces({"openai": OutputFilters(drop_phrases=("Great question! ",))})},
        "assistant",
    )
    return create_app(runtime, model_name="scripted:model", ping_interval=0.2, surfaces=surfaces)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(app) as client:
        yield client


def ask(*messages: str, **body: Any) -> dict[str, Any]:
    roles = ["user", "assistant"]
    said = [{"role": roles[i % 2], "content": m} for i, m in enumerate(messages)]
    return {"model": "ostinato", "messages": said, **body}


def chunks(response: httpx.Response) -> list[Any]:
    events = [e for e in response.text.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    return [json.loads(e[6:]) for e in events[:-1]]


async def rows(client: httpx.AsyncClient, cid: str) -> list[tuple[str, str]]:
    found = (await client.get(f"/v1/conversations/{cid}/messages")).json()["messages"]
    texts = [(r["role"], "".join(b.get("text", "") for b in r["blocks"])) for r in found]
    return [(role, text) for role, text in texts if role != "tool"]


async def test_a_completion_in_openais_shape_with_the_conversation_in_a_header(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(text_step("Hello Ann."))
    response = await client.post(URL, json=ask("hi, I am Ann"))
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    assert body["model"] == "ostinato"
    (choice,) = body["choices"]
    assert choice["message"] == {"role": "assistant", "content": "Hello Ann.", "refusal": None}
    assert choice["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    cid = response.headers[HEADER]
    assert await rows(client, cid) == [("user", "hi, I am Ann"), ("assistant", "Hello Ann.")]


async def test_a_stream_of_chunks_with_usage_then_done(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(text_step("One two three.", chunks=3))
    body = ask("count", stream=True, stream_options={"include_usage": True})
    response = await client.post(URL, json=body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers[HEADER]
    got = chunks(response)
    assert {c["object"] for c in got} == {"chat.completion.chunk"}
    assert len({c["id"] for c in got}) == 1
    assert got[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in got if c["choices"])
    assert text == "One two three."
    assert [c["choices"][0]["finish_reason"] for c in got[:-1]][-1] == "stop"
    assert all(c["usage"] is None for c in got[:-1])
    assert got[-1]["choices"] == [] and got[-1]["usage"]["total_tokens"] == 13


async def test_resent_history_is_not_stored_again_whichever_way_the_id_comes(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(text_step("A1"), text_step("A2"), text_step("A3"), text_step("A4"), text_step("A5"))
    first = await client.post(URL, json=ask("Q1"))
    cid = first.headers[HEADER]
    history = ["Q1", "A1"]
    ways: list[dict[str, Any]] = [
        {"headers": {HEADER: cid}},
        {"body": {"conversation_id": cid}},  # extra_body={"conversation_id": ...}
        {"body": {"extra_body": {"conversation_id": cid}}},
        {"body": {"metadata": {"conversation_id": cid}}},
    ]
    for n, way in enumerate(ways, start=2):
        response = await client.post(
            URL, json=ask(*history, f"Q{n}", **way.get("body", {})), headers=way.get("headers")
        )
        assert response.headers[HEADER] == cid
        history += [f"Q{n}", response.json()["choices"][0]["message"]["content"]]
    expected = [(("user", "assistant")[i % 2], text) for i, text in enumerate(history)]
    assert await rows(client, cid) == expected


async def test_user_names_a_conversation_only_when_it_is_one(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(text_step("A1"), text_step("A2"), text_step("A3"))
    cid = (await client.post(URL, json=ask("Q1"))).headers[HEADER]
    again = await client.post(URL, json=ask("Q1", "A1", "Q2", user=cid))
    assert again.headers[HEADER] == cid
    other = await client.post(URL, json=ask("Q3", user="ann@example.com"))
    assert other.status_code == 200 and other.headers[HEADER] != cid


async def test_without_an_id_a_new_conversation_holds_the_messages_sent(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    def sees_history(request: ModelRequest) -> None:
        assert [m.text for m in request.messages][:3] == ["Q1", "A1", "Q2"]

    model.add(Step(text_step("A2").events, expect=sees_history))
    response = await client.post(URL, json=ask("Q1", "A1", "Q2"))
    cid = response.headers[HEADER]
    assert await rows(client, cid) == [
        ("user", "Q1"),
        ("assistant", "A1"),
        ("user", "Q2"),
        ("assistant", "A2"),
    ]


async def test_another_owners_conversation_is_answered_like_a_missing_one(
    runtime: Runtime, client: httpx.AsyncClient
) -> None:
    theirs = await runtime.create_conversation(owner="someone-else")
    del theirs  # mode none: the local owner sees every conversation; see test_route_ownership
    missing = await client.post(URL, json=ask("hi"), headers={HEADER: "no-such-id"})
    assert missing.status_code == 404
    error = missing.json()["error"]
    assert error == {
        "message": "no conversation with id 'no-such-id'",
        "type": "not_found_error",
        "param": None,
        "code": "not_found",
    }


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        (ask("hi", tools=[{"type": "function", "function": {"name": "f"}}]), "tools", 400),
        ({"model": "ostinato", "messages": [{"role": "tool", "content": "x"}]}, "messages.0", 400),
        (ask("hi", "there"), "messages", 400),
        (ask("hi") | {"model": "gpt-nope"}, "model", 404),
        ({"messages": []}, "model", 400),
        (ask("hi", n=2), "n", 400),
    ],
)
async def test_bad_requests_answer_openais_error_shape(
    client: httpx.AsyncClient, body: dict[str, Any], param: str, code: int
) -> None:
    response = await client.post(URL, json=body)
    assert response.status_code == code, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param and error["message"]
    bad = await client.post(URL, content=b"{", headers={"content-type": "application/json"})
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"


async def test_an_approval_ends_the_completion_and_yes_answers_it(
    runtime: Runtime, client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(tool_step(("deploy", {"target": "prod"}), text="Deploying."), text_step("Done."))
    first = await client.post(URL, json=ask("ship it", stream=True))
    cid = first.headers[HEADER]
    said = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks(first))
    assert said.startswith("Deploying.\n\nWaiting for your approval: deploy")
    assert "Answer yes to allow it" in said
    second = await client.post(URL, json=ask("ship it", said, "yes"), headers={HEADER: cid})
    assert second.json()["choices"][0]["message"]["content"] == "Done."
    approvals = (await client.get(f"/v1/conversations/{cid}/approvals")).json()["approvals"]
    assert [(a["ending"], a["decided_by"]) for a in approvals] == [("APPROVED", "user")]
    assert ("user", "yes") not in await rows(client, cid)  # an answer, not a message


async def test_a_card_is_answered_by_naming_an_option(
    runtime: Runtime, client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    card = {"question": "Which colour?", "options": ["red", "blue"]}
    model.add(tool_step(("ask_user", card)))

    def got_blue(request: ModelRequest) -> None:
        assert request.messages[-1].blocks[0].content == "blue"  # type: ignore[union-attr]

    model.add(Step(text_step("Blue it is.").events, expect=got_blue))
    first = await client.post(URL, json=ask("paint the fence"))
    cid = first.headers[HEADER]
    text = first.json()["choices"][0]["message"]["content"]
    assert text == "Which colour?\nReply with one of: 1. red; 2. blue."
    second = await client.post(URL, json=ask("paint", text, "2"), headers={HEADER: cid})
    assert second.json()["choices"][0]["message"]["content"] == "Blue it is."


async def test_the_agents_filters_apply_to_what_is_shown_and_not_to_the_row(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(text_step("Great question! Yes.", chunks=4), text_step("Great question! No."))
    streamed = await client.post(URL, json=ask("q", model="coder", stream=True))
    text = "".join(
        c["choices"][0]["delta"].get("content", "") for c in chunks(streamed) if c["choices"]
    )
    assert text == "Yes."
    cid = streamed.headers[HEADER]
    whole = await client.post(URL, json=ask("q", "Yes.", "r", model="coder"), headers={HEADER: cid})
    assert whole.json()["choices"][0]["message"]["content"] == "No."
    assert ("assistant", "Great question! Yes.") in await rows(client, cid)


async def test_model_names_the_agent_and_its_instructions_are_added_only_if_it_allows(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    def with_addition(request: ModelRequest) -> None:
        assert request.system.endswith("Answer in French.")

    def without(request: ModelRequest) -> None:
        assert "French" not in request.system

    model.add(Step(text_step("Oui.").events, expect=with_addition))
    model.add(Step(text_step("Yes.").events, expect=without))
    system = {"role": "system", "content": "Answer in French."}
    for name in ("Forge", "assistant"):
        body = {"model": name, "messages": [system, {"role": "user", "content": "hello"}]}
        response = await client.post(URL, json=body)
        assert response.status_code == 200, response.text
        cid = response.headers[HEADER]
        user = (await client.get(f"/v1/conversations/{cid}/messages")).json()["messages"][0]
        assert user["metadata"]["route"]["reason"] == "requested"
        assert user["metadata"]["route"]["instructions"] is (name == "Forge")
    listed = (await client.get("/v1/models")).json()["data"]
    assert [m["id"] for m in listed][:3] == ["ostinato", "assistant", "coder"]


async def test_a_new_message_supersedes_the_running_turn(
    runtime: Runtime, store: Store, client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(Step(text_step("slow answer", chunks=50).events, delay=0.2), text_step("fast"))
    cid = (await runtime.create_conversation()).id
    import asyncio

    first = asyncio.create_task(client.post(URL, json=ask("slow"), headers={HEADER: cid}))
    await eventually(lambda: _running(runtime, cid))
    second = await client.post(URL, json=ask("slow", "", "fast"), headers={HEADER: cid})
    assert second.json()["choices"][0]["message"]["content"] == "fast"
    assert (await first).status_code == 200
    await eventually(lambda: turn_ended(store, cid, 2))
    stops = sorted(t.stop_reason or "" for t in await store.list_turns(cid))
    assert stops == ["cancelled", "end_turn"]


async def _running(runtime: Runtime, cid: str) -> bool:
    return runtime.running(cid) is not None


async def test_a_native_turn_names_its_agent_and_instructions_in_the_body(
    runtime: Runtime, client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    def with_addition(request: ModelRequest) -> None:
        assert request.system.endswith("Be brief.")

    model.add(Step(text_step("ok").events, expect=with_addition))
    cid = (await runtime.create_conversation()).id
    turns = f"/v1/conversations/{cid}/turns"
    body = {"text": "hello", "agent": "coder", "instructions": "Be brief."}
    response = await client.post(turns, json=body)
    assert response.status_code == 200, response.text
    assert response.json()["messages"][0]["metadata"]["route"] == {
        "skill": "coder",
        "persona": "Forge",
        "tier": "allegro",
        "reason": "requested",
        "instructions": True,
    }
    unknown = await client.post(turns, json={"text": "hi", "agent": "nobody"})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["message"] == "no agent named 'nobody'"
    card = {"tool_response": {"tool_use_id": "x", "result": 1}, "agent": "coder"}
    assert (await client.post(turns, json=card)).status_code == 422


async def test_a_failed_turn_is_a_502_the_sdks_do_not_retry_and_an_error_event_streamed(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    from ostinato.errors import ModelError
    from ostinato.models.scripted import error_step

    model.add(error_step(ModelError("the provider fell over")))
    failed = await client.post(URL, json=ask("hi"))
    assert failed.status_code == 502 and failed.headers["x-should-retry"] == "false"
    assert "the provider fell over" in failed.json()["error"]["message"]
    assert failed.headers[HEADER]
    model.add(error_step(ModelError("again")))
    streamed = await client.post(URL, json=ask("hi", stream=True))
    assert streamed.status_code == 200
    assert "again" in chunks(streamed)[-1]["error"]["message"]


async def test_a_client_that_goes_away_mid_stream_cancels_its_turn(
    app: FastAPI, store: Store, runtime: Runtime, model: ScriptedModel
) -> None:
    from tests.server.sse_client import open_stream

    model.add(Step(text_step("word " * 100, chunks=100).events, delay=0.05))
    cid = (await runtime.create_conversation()).id
    body = json.dumps(ask("talk", stream=True)).encode()
    headers = {"content-type": "application/json", HEADER: cid}
    async with open_stream(app, "POST", URL, headers=headers, body=body) as stream:
        assert stream.status == 200
        first = await stream.next_event()
        assert first.data["object"] == "chat.completion.chunk"
        await stream.next_event()  # some text has streamed
    await eventually(lambda: turn_ended(store, cid))
    (turn,) = await store.list_turns(cid)
    assert turn.stop_reason == "cancelled"
    kept = [m for m in await store.list_messages(cid) if m.role == "assistant"]
    assert kept and kept[0].text.startswith("word")  # the partial reply is kept
