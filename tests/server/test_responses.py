"""``/v1/responses`` (OpenAI's Responses API) against the app in memory, with a scripted
model, on every store engine: a response with a tool call, streamed and not; chaining
with ``previous_response_id`` (an earlier response forks the conversation);
``conversation``; an approval asked as an ``mcp_approval_request`` and answered by an
``mcp_approval_response`` (or a typed ``yes``); a question card; background responses
polled, streamed again from their start or after an event (the replay numbers every
event as the live stream did), cancelled; idempotency keys; what is refused."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ostinato.approvals import ApprovalPolicy
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.base import Store
from ostinato.tools import function_tool
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.registry import ToolRegistry
from tests.server.people import client_for, deploy_tool

URL = "/v1/responses"


@pytest.fixture
def gate() -> asyncio.Event:
    return asyncio.Event()


@pytest.fixture
async def runtime(
    store: Store, model: ScriptedModel, gate: asyncio.Event
) -> AsyncIterator[Runtime]:
    async def wait_for() -> str:
        """Wait until the test opens the gate."""
        await gate.wait()
        return "waited"

    tools = ToolRegistry([deploy_tool([]), function_tool(wait_for), *builtin_tools()])
    runtime = Runtime(store, model=model, tools=tools, approvals=ApprovalPolicy(timeout=60))
    yield runtime
    await runtime.close()


@pytest.fixture
def app(runtime: Runtime) -> FastAPI:
    return create_app(runtime, model_name="scripted:model", ping_interval=0.2)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(app) as client:
        yield client


async def until(
    fetch: Callable[[], Awaitable[httpx.Response]], done: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """Fetch until ``done`` holds of the JSON (yielding to the loop, not for a duration)."""
    for _ in range(1000):
        found: dict[str, Any] = (await fetch()).json()
        if done(found):
            return found
        await asyncio.sleep(0.01)
    raise AssertionError("never")


def events_of(text: str) -> list[dict[str, Any]]:
    out = []
    for block in text.split("\n\n"):
        data = [line[6:] for line in block.splitlines() if line.startswith("data: ")]
        if data:
            out.append(json.loads(data[0]))
    return out


def text_of(response: dict[str, Any]) -> str:
    return "".join(
        part["text"]
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
    )


def kinds(response: dict[str, Any]) -> list[str]:
    return [item["type"] for item in response["output"]]


async def test_a_response_with_a_tool_call_streamed_and_not(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(
        tool_step(("calculator", {"expression": "6*7"}), text="Let me see."),
        text_step("It is 42.", chunks=3),
    )
    made = (await client.post(URL, json={"model": "ostinato", "input": "6*7?"})).json()
    assert made["object"] == "response" and made["status"] == "completed"
    assert kinds(made) == ["message", "mcp_call", "message"]
    assert text_of(made) == "Let me see.It is 42."
    call = made["output"][1]
    assert call["server_label"] == "ostinato" and call["name"] == "calculator"
    assert json.loads(call["arguments"]) == {"expression": "6*7"}
    assert call["status"] == "completed" and "42" in call["output"]
    assert made["usage"]["output_tokens"] > 0
    model.add(text_step("Twice that is 84.", chunks=4))
    asked = {"input": "and twice?", "previous_response_id": made["id"], "stream": True}
    streamed = await client.post(URL, json=asked)
    assert streamed.headers["content-type"].startswith("text/event-stream")
    events = events_of(streamed.text)
    types = [e["type"] for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types.count("response.output_text.delta") == 4
    assert types[-1] == "response.completed"
    numbers = [e["sequence_number"] for e in events]
    assert numbers == sorted(set(numbers))
    final = events[-1]["response"]
    assert text_of(final) == "Twice that is 84."
    assert final["conversation"] == made["conversation"]
    assert final["previous_response_id"] == made["id"]
    got = (await client.get(f"{URL}/{final['id']}")).json()
    assert got["output"] == final["output"] and got["status"] == "completed"


async def test_a_stream_read_again_has_the_same_numbers_and_resumes_inside_a_text(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(
        tool_step(("calculator", {"expression": "1+1"}), text="Counting."),
        text_step("The answer is two, as ever.", chunks=5),
    )
    live = events_of((await client.post(URL, json={"input": "1+1", "stream": True})).text)
    rid = live[0]["response"]["id"]
    again = events_of((await client.get(f"{URL}/{rid}", params={"stream": "true"})).text)
    steps = [(e["type"], e["sequence_number"]) for e in live if "delta" not in e]
    assert [(e["type"], e["sequence_number"]) for e in again if "delta" not in e] == steps
    assert again[-1]["response"]["output"] == live[-1]["response"]["output"]
    deltas = [e for e in live if e["type"] == "response.output_text.delta"]
    middle = deltas[-3]  # inside the second message's text
    tail = await client.get(
        f"{URL}/{rid}", params={"stream": "true", "starting_after": middle["sequence_number"]}
    )
    rest = events_of(tail.text)
    after = "".join(e["delta"] for e in deltas if e["sequence_number"] > middle["sequence_number"])
    assert rest[0]["type"] == "response.output_text.delta" and rest[0]["delta"] == after
    assert all(e["sequence_number"] > middle["sequence_number"] for e in rest)
    assert rest[-1]["type"] == "response.completed"


async def test_an_approval_is_a_request_item_answered_by_an_approval_response(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(tool_step(("deploy", {"target": "prod"})), text_step("Deployed."))
    first = (await client.post(URL, json={"input": "deploy it"})).json()
    assert first["status"] == "completed"
    (asked,) = [i for i in first["output"] if i["type"] == "mcp_approval_request"]
    assert asked["name"] == "deploy" and json.loads(asked["arguments"]) == {"target": "prod"}
    assert "mcp_call" not in kinds(first)  # a call that asks is not shown running
    answer = {"type": "mcp_approval_response", "approval_request_id": asked["id"], "approve": True}
    body = {"input": [answer], "previous_response_id": first["id"], "stream": True}
    events = events_of((await client.post(URL, json=body)).text)
    second = events[-1]["response"]
    assert kinds(second) == ["mcp_call", "message"]
    call = second["output"][0]
    assert call["approval_request_id"] == asked["id"] and call["status"] == "completed"
    assert call["output"] == "deployed prod" and text_of(second) == "Deployed."
    again = (await client.get(f"{URL}/{second['id']}")).json()
    assert again["output"] == second["output"]
    items = (await client.get(f"{URL}/{second['id']}/input_items")).json()["data"]
    assert [(i["type"], i["approve"]) for i in items] == [("mcp_approval_response", True)]
    twice = await client.post(URL, json={**body, "previous_response_id": second["id"]})
    assert twice.status_code == 409  # decided already: the call ran once


async def test_a_declined_approval_and_one_answered_by_typing(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(tool_step(("deploy", {"target": "a"})), text_step("Not deployed."))
    first = (await client.post(URL, json={"input": "deploy"})).json()
    (asked,) = [i for i in first["output"] if i["type"] == "mcp_approval_request"]
    no = {"type": "mcp_approval_response", "approval_request_id": asked["id"], "approve": False}
    second = (await client.post(URL, json={"input": [no]})).json()  # no previous id: found
    assert second["output"][0]["status"] == "failed"
    assert "declined" in second["output"][0]["error"]["content"]
    model.add(tool_step(("deploy", {"target": "b"})), text_step("Done."))
    third = await client.post(URL, json={"input": "again", "previous_response_id": second["id"]})
    yes = {"input": "yes", "previous_response_id": third.json()["id"]}
    fourth = (await client.post(URL, json=yes)).json()
    assert fourth["output"][0]["output"] == "deployed b" and text_of(fourth) == "Done."


async def test_a_question_card_is_said_and_answered_by_text(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    ask = {"question": "Which colour?", "options": ["red", "blue"]}
    model.add(tool_step(("ask_user", ask)), text_step("Blue it is."))
    first = (await client.post(URL, json={"input": "pick"})).json()
    assert first["status"] == "completed" and "Which colour?" in text_of(first)
    assert "2. blue" in text_of(first)
    second = await client.post(URL, json={"input": "2", "previous_response_id": first["id"]})
    assert text_of(second.json()) == "Blue it is."


async def test_an_earlier_response_forks_and_a_conversation_is_named(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(text_step("one"), text_step("two"), text_step("three"), text_step("four"))
    first = (await client.post(URL, json={"input": "1"})).json()
    second = await client.post(URL, json={"input": "2", "previous_response_id": first["id"]})
    fork = await client.post(URL, json={"input": "3", "previous_response_id": first["id"]})
    assert fork.status_code == 200 and text_of(fork.json()) == "three"
    cid = first["conversation"]["id"]
    assert fork.json()["conversation"]["id"] == cid
    said = [m.text for m in model.requests[-1].messages if m.role == "user"]
    assert said == ["1", "3"]  # "2" is on the other branch
    rows = (await client.get(f"/v1/conversations/{cid}/messages")).json()["messages"]
    assert [r["blocks"][0]["text"] for r in rows] == ["1", "one", "3", "three"]
    again = (await client.get(f"{URL}/{second.json()['id']}")).json()
    assert text_of(again) == "two"  # the response left on the other branch reads the same
    two = [{"role": "user", "content": "x"}, {"role": "user", "content": "y"}]
    many = await client.post(URL, json={"input": two, "previous_response_id": first["id"]})
    assert many.status_code == 400 and many.json()["error"]["param"] == "input"
    third = await client.post(URL, json={"input": "4", "conversation": {"id": cid}})
    assert text_of(third.json()) == "four" and third.json()["conversation"]["id"] == cid
    rows = (await client.get(f"/v1/conversations/{cid}/messages")).json()["messages"]
    assert [r["role"] for r in rows] == ["user", "assistant"] * 3


async def test_history_given_in_the_input_is_stored_once(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(text_step("fine"))
    said = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ok?"}]},
    ]
    made = (await client.post(URL, json={"input": said})).json()
    rows = (await client.get(f"/v1/conversations/{made['conversation']['id']}/messages")).json()
    assert [(r["role"], r["blocks"][0].get("text")) for r in rows["messages"]] == [
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "ok?"),
        ("assistant", "fine"),
    ]


async def test_background_polled_cancelled_and_queued(
    client: httpx.AsyncClient, model: ScriptedModel, gate: asyncio.Event
) -> None:
    model.add(tool_step(("wait_for", {})))
    made = (await client.post(URL, json={"input": "go", "background": True})).json()
    assert made["status"] == "in_progress" and made["background"] is True
    got = await until(lambda: client.get(f"{URL}/{made['id']}"), kinds)
    assert got["status"] == "in_progress" and kinds(got) == ["mcp_call"]
    queued = await client.post(
        URL, json={"input": "next", "background": True, "conversation": made["conversation"]}
    )
    assert queued.json()["status"] == "queued"
    refused = await client.post(f"{URL}/{queued.json()['id']}/cancel")
    assert refused.status_code == 409
    # the queued turn's reply, scripted before the cancel: it may begin and call the model
    # before the cancel's answer reaches this test (the cancelled turn calls it no more)
    model.add(text_step("queued one ran"))
    cancelled = (await client.post(f"{URL}/{made['id']}/cancel")).json()
    assert cancelled["status"] == "cancelled"
    gate.set()
    done = await until(
        lambda: client.get(f"{URL}/{queued.json()['id']}"), lambda r: r["status"] == "completed"
    )
    assert text_of(done) == "queued one ran"


async def test_idempotency_key_answers_a_retry_with_the_first_response(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(text_step("only once"))
    key = {"idempotency-key": "k-1"}
    first = (await client.post(URL, json={"input": "hi"}, headers=key)).json()
    again = (await client.post(URL, json={"input": "hi"}, headers=key)).json()
    assert again["id"] == first["id"] and text_of(again) == "only once"
    other = await client.post(URL, json={"input": "other"}, headers=key)
    assert other.status_code == 400
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    rows = (await client.get(f"/v1/conversations/{first['conversation']['id']}/messages")).json()
    assert len(rows["messages"]) == 2


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "x", "tools": [{"type": "function", "name": "f"}]}, "tools.0"),
        ({"input": "x", "tools": [{"type": "mcp", "server_label": "other"}]}, "tools.0"),
        ({"input": "x", "prompt": {"id": "p"}}, "prompt"),
        ({"input": "x", "made_up": 1}, "made_up"),
        ({"input": "x", "text": {"format": {"type": "json_schema"}}}, "text.format"),
        ({"input": "x", "tool_choice": "required"}, "tool_choice"),
        ({"input": "x", "background": True, "store": False}, "store"),
        ({"input": [{"type": "function_call_output", "output": "1"}]}, "input.0"),
        ({"input": [{"role": "user", "content": [{"type": "input_image"}]}]}, "input.0.content"),
        ({"input": "x", "previous_response_id": "a", "conversation": "b"}, "previous_response_id"),
        ({"input": ""}, "input"),
    ],
)
async def test_what_is_refused_is_a_400_naming_it(
    client: httpx.AsyncClient, body: dict[str, Any], param: str
) -> None:
    refused = await client.post(URL, json=body)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error"


async def test_unknown_things_are_404s_in_openai_shape(client: httpx.AsyncClient) -> None:
    for path in (f"{URL}/resp_nope", f"{URL}/resp_nope/input_items"):
        missing = await client.get(path)
        assert missing.status_code == 404 and "resp_nope" in missing.json()["error"]["message"]
    unknown = await client.post(URL, json={"input": "x", "model": "gpt-nope"})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
    gone = await client.post(URL, json={"input": "x", "previous_response_id": "resp_nope"})
    assert gone.status_code == 404
    answer = {"type": "mcp_approval_response", "approval_request_id": "mcpr_x", "approve": True}
    assert (await client.post(URL, json={"input": [answer]})).status_code == 404


async def test_a_deleted_response_is_gone_and_its_rows_stay(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(text_step("kept"))
    made = (await client.post("/openai/v1/responses", json={"input": "hi"})).json()
    deleted = await client.delete(f"/openai/v1/responses/{made['id']}")
    assert deleted.json() == {"id": made["id"], "object": "response", "deleted": True}
    assert (await client.get(f"{URL}/{made['id']}")).status_code == 404
    rows = (await client.get(f"/v1/conversations/{made['conversation']['id']}/messages")).json()
    assert len(rows["messages"]) == 2
