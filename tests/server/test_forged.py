"""Forged tools end to end through the server, with a scripted model and two API-key
callers: the person asks for a Celsius-to-Fahrenheit tool, approves the code the card
shows, and in the next message the agent calls ``my_celsius_to_fahrenheit``; the other
person sees neither the tool nor its listing. Plus ``/v1/tools/forged`` itself."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

from ostinato.approvals import ApprovalPolicy
from ostinato.identity.keys import create_key
from ostinato.identity.settings import AuthSettings
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.base import Store
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.forge import Limits, Sandbox
from ostinato.tools.forge.tools import forge_tools, forged_source
from ostinato.tools.mounting import Mount, Source
from tests.server.people import SSE, eventually, turn_ended
from tests.server.sse_client import open_stream

SCHEMA = {
    "type": "object",
    "properties": {"celsius": {"type": "number", "description": "Degrees Celsius."}},
    "required": ["celsius"],
}
C_TO_F = "(args) => ({fahrenheit: args.celsius * 9 / 5 + 32})"
CREATE = {
    "name": "celsius_to_fahrenheit",
    "description": "Convert a temperature from Celsius to Fahrenheit.",
    "parameters": SCHEMA,
    "code": C_TO_F,
    "example": {"celsius": 100},
}


@dataclass
class People:
    app: FastAPI
    runtime: Runtime
    keys: dict[str, str]
    ann: httpx.AsyncClient
    bob: httpx.AsyncClient


@pytest.fixture
async def people(store: Store, model: ScriptedModel) -> AsyncIterator[People]:
    sandbox = Sandbox(limits=Limits(wall_s=20.0))
    builtins = [*builtin_tools(), *forge_tools(store, sandbox)]
    runtime = Runtime(
        store,
        model=model,
        mount=Mount([Source("builtins", builtins, builtin=True), forged_source(store, sandbox)]),
        approvals=ApprovalPolicy(timeout=60),
        sandbox=sandbox,
    )
    app = create_app(runtime, ping_interval=0.2, auth=AuthSettings(mode="keys", key_cache_s=0))
    keys = {who: (await create_key(store, who, "test"))[1] for who in ("ann", "bob")}
    transport = httpx.ASGITransport(app=app)
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(
                    transport=transport,
                    base_url="http://test",
                    headers={"authorization": f"Bearer {keys[who]}"},
                )
            )
            for who in ("ann", "bob")
        ]
        yield People(app, runtime, keys, *clients)
    await app.state.ostinato.aclose()
    await runtime.close()


def turn(people: People, who: str, cid: str, text: str) -> contextlib.AbstractAsyncContextManager:  # type: ignore[type-arg]
    headers = {**SSE, "authorization": f"Bearer {people.keys[who]}"}
    body = json.dumps({"text": text}).encode()
    return open_stream(
        people.app, "POST", f"/v1/conversations/{cid}/turns", headers=headers, body=body
    )


async def test_make_a_tool_approve_its_code_and_use_it_in_the_next_message(
    people: People, model: ScriptedModel, store: Store
) -> None:
    cid = (await people.ann.post("/v1/conversations")).json()["id"]
    model.add(tool_step(("create_tool", CREATE)), text_step("Done: my_celsius_to_fahrenheit."))
    async with turn(people, "ann", cid, "make a tool that converts Celsius to Fahrenheit") as s:
        asked = (await s.frames_until("approval.requested", within=30))[-1].data
        assert asked["tool"] == "create_tool" and asked["risk"] == "exec"
        assert asked["input"]["code"] == C_TO_F  # the person sees the code they approve
        pending = (await people.ann.get(f"/v1/conversations/{cid}/approvals?pending=true")).json()
        assert pending["approvals"][0]["arguments"]["code"] == C_TO_F
        url = f"/v1/conversations/{cid}/approvals/{asked['approval_id']}"
        assert (await people.ann.post(url, json={"decision": "approve"})).status_code == 200
        finished = (await s.frames_until("turn.finished", within=30))[-1].data
    assert finished["stop_reason"] == "end_turn"
    (made,) = [c for c in await store.list_tool_calls(cid) if c.name == "create_tool"]
    assert made.status == "ok" and '"my_celsius_to_fahrenheit"' in (made.result or "")

    model.add(
        tool_step(("my_celsius_to_fahrenheit", {"celsius": 100})),
        text_step("100 °C is 212 °F."),
    )
    async with turn(people, "ann", cid, "what is 100 °C in Fahrenheit?") as s:
        finished = (await s.frames_until("turn.finished", within=30))[-1].data
    assert finished["stop_reason"] == "end_turn"
    offered = [t.name for t in model.requests[-1].tools]
    assert "my_celsius_to_fahrenheit" in offered
    (used,) = [c for c in await store.list_tool_calls(cid) if c.name.startswith("my_")]
    assert used.status == "ok" and json.loads(used.result or "") == {"fahrenheit": 212}
    rows = (await people.ann.get(f"/v1/conversations/{cid}/messages")).json()["messages"]
    assert rows[-1]["blocks"][0]["text"] == "100 °C is 212 °F."

    # The other person: no tool in the listing, none offered, and calling it is unknown.
    assert (await people.bob.get("/v1/tools/forged")).json() == {"tools": []}
    other = (await people.bob.post("/v1/conversations")).json()["id"]
    model.add(tool_step(("my_celsius_to_fahrenheit", {"celsius": 1})), text_step("No."))
    async with turn(people, "bob", other, "convert 1 °C") as s:
        await s.frames_until("turn.finished", within=30)
    assert "my_celsius_to_fahrenheit" not in [t.name for t in model.requests[-1].tools]
    (refused,) = await store.list_tool_calls(other)
    assert refused.is_error and "there is no tool named" in (refused.result or "")
    await eventually(lambda: turn_ended(store, other))


async def test_a_conversation_keeps_the_version_it_started_with_across_an_edit(
    people: People, model: ScriptedModel, store: Store
) -> None:
    async def convert(cid: str) -> tuple[object, str]:
        model.add(tool_step(("my_celsius_to_fahrenheit", {"celsius": 37})), text_step("ok"))
        async with turn(people, "ann", cid, "37 °C in Fahrenheit?") as s:
            await s.frames_until("turn.finished", within=30)
        (offered,) = [t for t in model.requests[-2].tools if t.name.startswith("my_")]
        calls = [c for c in await store.list_tool_calls(cid) if c.name.startswith("my_")]
        return json.loads(calls[-1].result or ""), offered.description

    cid = (await people.ann.post("/v1/conversations")).json()["id"]
    model.add(tool_step(("create_tool", CREATE)), text_step("Made it."))
    async with turn(people, "ann", cid, "make a converter") as s:
        asked = (await s.frames_until("approval.requested", within=30))[-1].data
        url = f"/v1/conversations/{cid}/approvals/{asked['approval_id']}"
        assert (await people.ann.post(url, json={"decision": "approve"})).status_code == 200
        await s.frames_until("turn.finished", within=30)
    result, description = await convert(cid)
    assert result == {"fahrenheit": 98.6} and "version 1" in description

    # An edit elsewhere (the API, another conversation) while this one goes on
    rounded = {**CREATE, "code": "(a) => ({fahrenheit: Math.round(a.celsius * 1.8 + 32)})"}
    assert (await people.ann.post("/v1/tools/forged", json=rounded)).status_code == 201
    result, description = await convert(cid)
    assert result == {"fahrenheit": 98.6} and "version 1" in description  # what it began with
    other = (await people.ann.post("/v1/conversations")).json()["id"]
    result, description = await convert(other)
    assert result == {"fahrenheit": 99} and "version 2" in description  # a new one: the newest
    result, _ = await convert(cid)
    assert result == {"fahrenheit": 98.6}  # still, turn after turn


async def test_the_owner_makes_lists_versions_and_removes_over_http(people: People) -> None:
    ann, bob = people.ann, people.bob
    made = await ann.post("/v1/tools/forged", json=CREATE)
    assert made.status_code == 201, made.text
    body = made.json()
    assert body["tool"]["name"] == "my_celsius_to_fahrenheit" and body["tool"]["version"] == 1
    assert body["tried"] == {"arguments": {"celsius": 100}, "result": {"fahrenheit": 212}}
    edited = await ann.post("/v1/tools/forged", json={**CREATE, "code": C_TO_F + " "})
    assert edited.json()["tool"]["version"] == 2
    (listed,) = (await ann.get("/v1/tools/forged")).json()["tools"]
    assert listed["version"] == 2 and listed["parameters"] == SCHEMA
    versions = (await ann.get("/v1/tools/forged/my_celsius_to_fahrenheit")).json()["tools"]
    assert [v["version"] for v in versions] == [1, 2]
    assert (await bob.get("/v1/tools/forged/celsius_to_fahrenheit")).status_code == 404
    assert (await bob.delete("/v1/tools/forged/celsius_to_fahrenheit")).status_code == 404
    removed = await ann.delete("/v1/tools/forged/celsius_to_fahrenheit")
    assert removed.status_code == 200 and removed.json()["removed_at"]
    assert (await ann.get("/v1/tools/forged")).json() == {"tools": []}
    assert (await ann.delete("/v1/tools/forged/celsius_to_fahrenheit")).status_code == 404


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"code": "() => { for (;;) {} }"}, "CPU time"),
        ({"code": "(a) => {"}, "SyntaxError"),
        ({"name": "Not OK"}, "name: string should match pattern"),
        ({"parameters": {"type": "string"}}, '"type": "object"'),
        ({"example": {"celsius": "warm"}}, "example does not match"),
        ({"code": "x" * 5000}, "4096"),  # the body's own cap: a validation error
        ({"extra": 1}, "extra"),
    ],
)
async def test_what_cannot_be_a_tool_is_a_422(
    people: People, change: dict[str, object], words: str
) -> None:
    response = await people.ann.post("/v1/tools/forged", json={**CREATE, **change})
    assert response.status_code == 422, response.text
    assert words.lower() in json.dumps(response.json()["error"]).lower().replace("\\", "")
    assert (await people.ann.get("/v1/tools/forged")).json() == {"tools": []}
