"""Switching tools off per user: the API, the protected set, and what the model is told."""

from __future__ import annotations

import httpx

from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.base import Store
from ostinato.tools.base import Tool
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.mounting import Mount, Source
from tests.server.conftest import Callers


async def test_a_user_switches_a_tool_off_and_the_model_is_told(
    client: httpx.AsyncClient, model: ScriptedModel, runtime: Runtime
) -> None:
    created = await client.post("/v1/conversations", json={"metadata": {}})
    cid = created.json()["id"]
    listed = await client.get("/v1/tools", params={"conversation_id": cid})
    assert listed.status_code == 200
    tools = {t["name"]: t for t in listed.json()["tools"]}
    assert tools["calculator"]["enabled"] and tools["ask_user"]["protected"]

    off = await client.put("/v1/tools/calculator", json={"conversation_id": cid, "enabled": False})
    assert off.status_code == 200 and off.json()["enabled"] is False
    protected = await client.put(
        "/v1/tools/ask_user", json={"conversation_id": cid, "enabled": False}
    )
    assert protected.status_code == 409 and "protected" in protected.json()["error"]["message"]
    unknown = await client.put("/v1/tools/ghost", json={"conversation_id": cid, "enabled": False})
    assert unknown.status_code == 404
    named = await client.put("/v1/tools/clock", json={"owner": "a", "enabled": False})
    assert named.status_code == 422  # the owner is the caller, never named

    model.add(tool_step(("calculator", {"expression": "1+1"})), text_step("it is off"))
    response = await client.post(f"/v1/conversations/{cid}/turns", json={"text": "add"})
    assert response.status_code == 200
    first_request = model.requests[0]
    assert "calculator" not in {t.name for t in first_request.tools}  # not offered
    rows = await runtime.store.list_messages(cid)
    result = rows[2].tool_results[0]
    assert result.is_error and "switched off by the user" in result.text  # and refused

    on = await client.put("/v1/tools/calculator", json={"conversation_id": cid, "enabled": True})
    assert on.json()["enabled"] is True
    again = await client.get("/v1/tools", params={"conversation_id": cid})
    assert {t["name"]: t["enabled"] for t in again.json()["tools"]}["calculator"] is True


async def test_switches_are_the_callers_own(callers: Callers) -> None:
    ann, bob = callers.ann, callers.bob
    assert (await ann.get("/v1/tools", params={"conversation_id": "nope"})).status_code == 404
    off = await ann.put("/v1/tools/clock", json={"enabled": False})
    assert off.status_code == 200
    mine = await ann.get("/v1/tools")
    theirs = await bob.get("/v1/tools")
    assert {t["name"]: t["enabled"] for t in mine.json()["tools"]}["clock"] is False
    assert {t["name"]: t["enabled"] for t in theirs.json()["tools"]}["clock"] is True
    anns = (await ann.post("/v1/conversations")).json()["id"]
    for response in (
        await bob.get("/v1/tools", params={"conversation_id": anns}),
        await bob.put("/v1/tools/clock", json={"conversation_id": anns, "enabled": False}),
    ):
        assert response.status_code == 404
    assert {t["name"]: t["enabled"] for t in (await ann.get("/v1/tools")).json()["tools"]}[
        "clock"
    ] is False


async def test_the_tool_sources_and_their_status(store: Store, model: ScriptedModel) -> None:
    async def down(owner: str | None) -> list[Tool]:
        raise ConnectionError("connection refused")

    mount = Mount(
        [
            Source("builtins", builtin_tools(), builtin=True),
            Source("openapi:old", error="cannot load old.json: not OpenAPI 3"),
            Source("mcp:down", lister=down),
        ]
    )
    runtime = Runtime(store, model=model, mount=mount)
    app = create_app(runtime)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        first = (await client.get("/v1/tools/sources")).json()["sources"]
        assert [(s["name"], s["state"]) for s in first] == [
            ("builtins", "ok"),
            ("openapi:old", "failed"),
            ("mcp:down", "not listed yet"),
        ]
        assert first[1]["error"] == "cannot load old.json: not OpenAPI 3"
        cid = (await client.post("/v1/conversations")).json()["id"]
        model.add(text_step("hello"))
        assert (await client.post(f"/v1/conversations/{cid}/turns", json={"text": "hi"})).is_success
        after = (await client.get("/v1/tools/sources")).json()["sources"]
    assert after[2]["state"] == "failed"
    assert after[2]["error"] == "ConnectionError: connection refused"
    assert after[0]["tools"] == len(builtin_tools()) and after[0]["checked_at"]
    await runtime.close()
