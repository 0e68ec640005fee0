"""OpenAI's Conversations API under ``/openai/v1/conversations`` and its guard: an
OpenAI SDK's request to ostinato's own ``/v1/conversations`` is refused, never read as a
native one, while every other client's is served as ever."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from ostinato.models.scripted import ScriptedModel, text_step
from tests.server.people import client_for

BASE = "/openai/v1/conversations"
SDK = {"x-stainless-lang": "python", "user-agent": "OpenAI/Python 3.60.0"}


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(app) as client:
        yield client


async def test_a_conversation_made_read_updated_and_listed_in_openai_shape(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    items = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    made = (await client.post(BASE, json={"items": items, "metadata": {"k": "v"}})).json()
    assert made["object"] == "conversation" and made["metadata"]["k"] == "v"
    assert isinstance(made["created_at"], int)
    assert (await client.get(f"{BASE}/{made['id']}")).json()["id"] == made["id"]
    model.add(text_step("answered"))
    answered = await client.post(
        "/openai/v1/responses", json={"input": "q", "conversation": made["id"]}
    )
    assert answered.json()["conversation"]["id"] == made["id"]
    listed = (await client.get(f"{BASE}/{made['id']}/items", params={"order": "asc"})).json()
    assert [(i["role"], i["content"][0]["text"]) for i in listed["data"]] == [
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "q"),
        ("assistant", "answered"),
    ]
    updated = (await client.post(f"{BASE}/{made['id']}", json={"metadata": {"k": "w"}})).json()
    assert updated["metadata"] == {"k": "w"}
    refused = await client.delete(f"{BASE}/{made['id']}")
    assert refused.status_code == 405  # ostinato keeps every row
    assert (await client.get(f"{BASE}/nope")).status_code == 404


async def test_an_openai_sdk_request_to_the_native_path_is_refused(
    client: httpx.AsyncClient,
) -> None:
    for method, path in (("POST", "/v1/conversations"), ("GET", "/v1/conversations/x/items")):
        refused = await client.request(method, path, headers=SDK, json={})
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert error["code"] == "wrong_base_url" and "/openai/v1" in error["message"]
    before = (await client.get("/v1/conversations")).json()["conversations"]
    assert before == []  # nothing was made by the refused request
    native = await client.post("/v1/conversations", json={"title": "mine"})
    assert native.status_code == 201 and native.json()["title"] == "mine"


async def test_items_that_are_not_a_list_are_a_400(client: httpx.AsyncClient) -> None:
    """The document says ``items`` is an array (or null): an object is refused, never
    read as no items (schemathesis's negative_data_rejection)."""
    refused = await client.post(BASE, json={"items": {}, "metadata": {}})
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "items"
    assert (await client.post(BASE, json={"items": None})).status_code == 200


async def test_the_document_says_a_forged_tools_parameters_are_an_object_schema(
    client: httpx.AsyncClient,
) -> None:
    """The rule the forge route enforces (``"type": "object"``) is stated in the OpenAPI
    document, so a schema-valid request is not refused for it."""
    document = (await client.get("/openapi.json")).json()
    schema = document["components"]["schemas"]["ForgeRequest"]["properties"]["parameters"]
    assert schema["required"] == ["type"] and schema["properties"]["type"] == {"const": "object"}
