"""Export and import over the API: a conversation exported (JSON, streamed; Markdown) and
imported back by its owner; another owner's is a 404 to export and a 422 to import; a
broken file a 422 naming the place; a file over ``requests.import_bytes`` a 413."""

from __future__ import annotations

import json

import httpx
from fastapi import FastAPI

from ostinato.memory.facts import Memory
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.server.app import create_app
from ostinato.server.limits import BodyLimits
from tests.server.conftest import Callers
from tests.store.test_store_transfer import chatgpt_file


async def test_export_and_import_back(
    client: httpx.AsyncClient, model: ScriptedModel, runtime: Runtime
) -> None:
    cid = (await client.post("/v1/conversations", json={"title": "Okapi"})).json()["id"]
    model.add(text_step("an okapi is a giraffid"))
    await client.post(f"/v1/conversations/{cid}/turns", json={"text": "what is an okapi?"})
    await runtime.settle(5)
    exported = await client.get(f"/v1/conversations/{cid}/export")
    assert exported.status_code == 200
    assert exported.headers["content-disposition"].endswith('.json"')
    document = exported.json()
    assert document["format"] == "ostinato-export" and document["version"] == 1
    texts = [m["blocks"][0]["text"] for m in document["conversations"][0]["messages"]]
    assert texts == ["what is an okapi?", "an okapi is a giraffid"]
    markdown = await client.get(f"/v1/conversations/{cid}/export", params={"format": "markdown"})
    assert markdown.headers["content-type"].startswith("text/markdown")
    assert markdown.text.startswith("# Okapi") and "an okapi is a giraffid" in markdown.text
    imported = await client.post("/v1/import", content=exported.content)
    assert imported.status_code == 201
    (copy,) = imported.json()["conversations"]
    rows = (await client.get(f"/v1/conversations/{copy}/messages")).json()["messages"]
    assert [m["blocks"][0]["text"] for m in rows] == texts
    everything = (await client.get("/v1/export")).json()
    assert {c["title"] for c in everything["conversations"]} == {"Okapi"}
    assert len(everything["conversations"]) == 2
    chatgpt = await client.post("/v1/import", json=chatgpt_file())
    assert chatgpt.status_code == 201


async def test_owners_and_broken_files(callers: Callers) -> None:
    cid = (await callers.ann.post("/v1/conversations", json={"title": "Ann's"})).json()["id"]
    assert (await callers.bob.get(f"/v1/conversations/{cid}/export")).status_code == 404
    document = (await callers.ann.get(f"/v1/conversations/{cid}/export")).json()
    refused = await callers.bob.post("/v1/import", json=document)
    assert refused.status_code == 422
    assert refused.json()["error"]["message"].startswith("owner:")
    document["version"] = 7
    wrong = await callers.ann.post("/v1/import", json=document)
    assert wrong.status_code == 422 and wrong.json()["error"]["message"].startswith("version")
    bob_sees = (await callers.bob.get("/v1/export")).json()["conversations"]
    assert bob_sees == []


async def test_a_file_over_the_limit_is_413(runtime: Runtime) -> None:
    app: FastAPI = create_app(
        runtime, model_name="m", store_name="s", limits=BodyLimits(import_bytes=100)
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        body = json.dumps(chatgpt_file()).encode()
        refused = await client.post("/v1/import", content=body)
        assert refused.status_code == 413
        assert refused.json()["error"]["kind"] == "import"
        assert (await client.get("/v1/conversations")).json()["conversations"] == []


async def test_an_admin_erases_an_owner(client: httpx.AsyncClient, callers: Callers) -> None:
    cid = (await client.post("/v1/conversations", json={"title": "Mine"})).json()["id"]
    refused = await callers.ann.delete("/v1/admin/owners/local")
    assert refused.status_code == 403
    erased = await client.delete("/v1/admin/owners/local")
    assert erased.status_code == 200
    assert erased.json() == {"owner": "local", "conversations": [cid]}
    assert (await client.get(f"/v1/conversations/{cid}")).status_code == 404


async def test_memories_when_asked(callers: Callers) -> None:
    cid = (await callers.ann.post("/v1/conversations", json={"title": "Ann's"})).json()["id"]
    fact = {"fact": "likes green tea", "subject": "drinks"}
    assert (await callers.ann.post("/v1/memories", json=fact)).status_code == 201
    assert (
        await callers.bob.post("/v1/memories", json={"fact": "bob's secret"})
    ).status_code == 201
    plain = (await callers.ann.get("/v1/export")).json()
    assert "memories" not in plain
    everything = await callers.ann.get("/v1/export", params={"memories": "true"})
    assert [m["text"] for m in everything.json()["memories"]] == ["likes green tea"]
    assert "bob's secret" not in everything.text
    one = await callers.ann.get(f"/v1/conversations/{cid}/export", params={"memories": "true"})
    assert [m["subject"] for m in one.json()["memories"]] == ["drinks"]
    markdown = await callers.ann.get(
        f"/v1/conversations/{cid}/export", params={"format": "markdown", "memories": "true"}
    )
    assert markdown.status_code == 422
    assert markdown.json()["error"]["message"].startswith("memories:")
    document = everything.json()
    document["memories"].append(dict(document["memories"][0], text=""))
    refused = await callers.ann.post("/v1/import", json=document)
    assert refused.status_code == 422
    assert refused.json()["error"]["message"].startswith("memories[1].text:")
    imported = await callers.ann.post("/v1/import", content=everything.content)
    assert imported.status_code == 201
    facts = (await callers.ann.get("/v1/memories")).json()["memories"]
    assert [f["fact"] for f in facts] == ["likes green tea", "likes green tea"]
    assert len((await callers.bob.get("/v1/memories")).json()["memories"]) == 1


async def test_memories_past_the_capacity_are_409(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    runtime.memory = Memory(runtime.store, capacity=1)
    assert (await client.post("/v1/memories", json={"fact": "likes tea"})).status_code == 201
    await client.post("/v1/conversations", json={"title": "Mine"})
    exported = await client.get("/v1/export", params={"memories": "true"})
    refused = await client.post("/v1/import", content=exported.content)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "memory_full"
    assert len((await client.get("/v1/conversations")).json()["conversations"]) == 1
