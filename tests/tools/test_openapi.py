"""OpenAPI tools against a local FastAPI app and the OpenAPI document it generates."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel

from ostinato.errors import ToolArgumentsInvalid, ToolError
from ostinato.tools.base import Tool, ToolContext
from ostinato.tools.openapi import (
    ApiKeyAuth,
    BasicAuth,
    BearerAuth,
    load_openapi,
    openapi_tools,
    parse_document,
)
from ostinato.tools.schema import ToolSourceError

CONTEXT = ToolContext("c", "t", "r", "u")
BASE = "http://api.test"


class Item(BaseModel):
    name: str
    price: float
    tags: list[str] = []


def make_app() -> FastAPI:
    app = FastAPI(title="shop", servers=[{"url": "/v1"}])

    @app.get("/items/{item_id}", operation_id="getItem", summary="Read one item")
    async def get_item(item_id: str, request: Request, verbose: bool = False) -> dict[str, Any]:
        return {"id": item_id, "raw": request.scope["raw_path"].decode(), "verbose": verbose}

    @app.get("/search", operation_id="search items v2!")
    async def search(
        q: str, tags: Annotated[list[str] | None, Query()] = None, limit: int = 10
    ) -> dict[str, Any]:
        return {"q": q, "tags": tags or [], "limit": limit}

    @app.post("/items", operation_id="createItem", status_code=201)
    async def create_item(item: Item) -> dict[str, Any]:
        return {"created": item.model_dump()}

    @app.delete("/items/{item_id}")
    async def delete_item(
        item_id: int, x_request_id: Annotated[str | None, Header()] = None
    ) -> dict[str, Any]:
        return {"deleted": item_id, "request_id": x_request_id}

    @app.get("/whoami", operation_id="whoami")
    async def whoami(request: Request) -> dict[str, Any]:
        return {
            "authorization": request.headers.get("authorization"),
            "x-api-key": request.headers.get("x-api-key"),
            "key": request.query_params.get("key"),
        }

    @app.get("/missing", operation_id="missing")
    async def missing() -> None:
        raise HTTPException(404, detail="no such thing")

    @app.get("/words", operation_id="words", response_class=PlainTextResponse)
    async def words(count: int = 3) -> str:
        return " ".join(["word"] * count)

    return app


@pytest.fixture
def app() -> FastAPI:
    return make_app()


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
        yield c


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {t.name: t for t in tools}


async def call(tool: Tool, arguments: dict[str, Any]) -> Any:
    return await tool.run(tool.validate(arguments), CONTEXT)


# --- building tools from the generated document ------------------------------------------


def test_each_operation_becomes_a_tool_with_a_safe_name(app: FastAPI) -> None:
    tools = by_name(openapi_tools(app.openapi(), base_url=BASE))
    assert set(tools) == {
        "getItem",
        "search_items_v2",
        "createItem",
        "delete_item_items__item_id__delete",
        "whoami",
        "missing",
        "words",
    }
    assert tools["getItem"].description == "Read one item"
    assert tools["whoami"].description == "Whoami"


def test_parameters_come_from_path_query_header_and_body(app: FastAPI) -> None:
    tools = by_name(openapi_tools(app.openapi(), base_url=BASE))
    get_item = tools["getItem"].parameters
    assert set(get_item["properties"]) == {"item_id", "verbose"}
    assert get_item["required"] == ["item_id"]
    assert get_item["additionalProperties"] is False

    search = tools["search_items_v2"].parameters["properties"]
    assert search["q"]["type"] == "string"
    assert search["limit"]["type"] == "integer"
    assert {"type": "array", "items": {"type": "string"}} in search["tags"]["anyOf"]

    delete = tools["delete_item_items__item_id__delete"].parameters
    assert set(delete["properties"]) == {"item_id", "x-request-id"}

    create = tools["createItem"].parameters
    body = create["properties"]["body"]  # the $ref to components/schemas/Item, inlined
    assert body["type"] == "object"
    assert set(body["properties"]) == {"name", "price", "tags"}
    assert body["required"] == ["name", "price"]
    assert create["required"] == ["body"]
    assert "$ref" not in json.dumps(create)


def test_risk_follows_the_method(app: FastAPI) -> None:
    tools = by_name(openapi_tools(app.openapi(), base_url=BASE))
    get = tools["getItem"]
    assert (get.category, get.risk, get.idempotent) == ("read", "network", True)
    # one remembered approval covers every call of a read operation: its family is the site
    assert get.family is not None and get.family({"item_id": 1}) == get.family({"item_id": 2})
    assert get.family({}) == "http://api.test:80"
    for name in ("createItem", "delete_item_items__item_id__delete"):
        tool = tools[name]
        assert (tool.category, tool.risk, tool.idempotent) == ("action", "write", False)
        assert tool.family is None  # a write is remembered exact only
    assert all(tool.untrusted for tool in tools.values())


def test_arguments_are_validated_against_the_schema(app: FastAPI) -> None:
    tools = by_name(openapi_tools(app.openapi(), base_url=BASE))
    with pytest.raises(ToolArgumentsInvalid, match="'item_id' is a required property"):
        tools["getItem"].validate({})
    with pytest.raises(ToolArgumentsInvalid, match=r"body\.price: 'cheap' is not of type 'number'"):
        tools["createItem"].validate({"body": {"name": "pen", "price": "cheap"}})
    with pytest.raises(ToolArgumentsInvalid, match="Additional properties"):
        tools["getItem"].validate({"item_id": "1", "colour": "red"})


def test_a_prefix_goes_before_every_name(app: FastAPI) -> None:
    tools = openapi_tools(app.openapi(), base_url=BASE, prefix="shop")
    assert "shop_getItem" in {t.name for t in tools}
    assert all(t.name.startswith("shop_") for t in tools)


# --- calling -----------------------------------------------------------------------------------


async def test_path_parameters_are_substituted_and_encoded(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    tools = by_name(openapi_tools(app.openapi(), base_url=BASE, client=client))
    result = await call(tools["getItem"], {"item_id": "a b&c?d", "verbose": True})
    assert result == {"id": "a b&c?d", "raw": "/items/a%20b%26c%3Fd", "verbose": True}


async def test_query_parameters_and_repeated_values(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    tools = by_name(openapi_tools(app.openapi(), base_url=BASE, client=client))
    result = await call(tools["search_items_v2"], {"q": "pens", "tags": ["blue", "cheap"]})
    assert result == {"q": "pens", "tags": ["blue", "cheap"], "limit": 10}


async def test_a_json_body_is_sent(app: FastAPI, client: httpx.AsyncClient) -> None:
    tools = by_name(openapi_tools(app.openapi(), base_url=BASE, client=client))
    result = await call(tools["createItem"], {"body": {"name": "pen", "price": 1.5}})
    assert result == {"created": {"name": "pen", "price": 1.5, "tags": []}}


async def test_header_parameters_are_sent(app: FastAPI, client: httpx.AsyncClient) -> None:
    tools = by_name(openapi_tools(app.openapi(), base_url=BASE, client=client))
    delete = tools["delete_item_items__item_id__delete"]
    result = await call(delete, {"item_id": 7, "x-request-id": "req-1"})
    assert result == {"deleted": 7, "request_id": "req-1"}


@pytest.mark.parametrize(
    ("auth", "seen"),
    [
        (BearerAuth("tok"), {"authorization": "Bearer tok", "x-api-key": None, "key": None}),
        (ApiKeyAuth("X-API-Key", "k1"), {"authorization": None, "x-api-key": "k1", "key": None}),
        (
            ApiKeyAuth("key", "k2", location="query"),
            {"authorization": None, "x-api-key": None, "key": "k2"},
        ),
        (
            BasicAuth("ann", "pw"),
            {
                "authorization": "Basic " + base64.b64encode(b"ann:pw").decode(),
                "x-api-key": None,
                "key": None,
            },
        ),
    ],
)
async def test_configured_auth_arrives(
    app: FastAPI, client: httpx.AsyncClient, auth: Any, seen: dict[str, Any]
) -> None:
    tools = by_name(openapi_tools(app.openapi(), base_url=BASE, auth=auth, client=client))
    assert await call(tools["whoami"], {}) == seen


async def test_http_errors_are_tool_errors_with_status_and_body(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    tools = by_name(openapi_tools(app.openapi(), base_url=BASE, client=client))
    with pytest.raises(ToolError, match=r'HTTP 404 Not Found: \{"detail":"no such thing"\}'):
        await call(tools["missing"], {})


async def test_text_responses_are_returned_as_text_and_cut(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = by_name(openapi_tools(app.openapi(), base_url=BASE, client=client))
    assert await call(tools["words"], {"count": 2}) == "word word"
    monkeypatch.setattr("ostinato.tools.openapi.calling.MAX_RESULT_CHARS", 20)
    cut = await call(tools["words"], {"count": 50})
    assert cut.startswith("word word word word ")
    assert cut.endswith("[the response was cut at 20 characters]")


async def test_an_unreachable_api_is_a_tool_error(app: FastAPI) -> None:
    async def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as dead:
        tools = by_name(openapi_tools(app.openapi(), base_url=BASE, client=dead))
        with pytest.raises(ToolError, match="GET /whoami failed: ConnectError"):
            await call(tools["whoami"], {})


async def test_calls_without_a_client_reach_a_real_server(app: FastAPI) -> None:
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical", log_config=None)
    server = uvicorn.Server(config)
    listener = socket.create_server(("127.0.0.1", 0))  # listening before serve() starts
    port = listener.getsockname()[1]
    task = asyncio.create_task(server.serve(sockets=[listener]))
    try:
        document = await load_openapi(f"http://127.0.0.1:{port}/openapi.json")
        # The document says servers: [{"url": "/v1"}], relative to where it was found.
        assert document["servers"][0]["url"] == f"http://127.0.0.1:{port}/v1"
        tools = by_name(openapi_tools(document, base_url=f"http://127.0.0.1:{port}"))
        assert await call(tools["search_items_v2"], {"q": "x", "limit": 2}) == {
            "q": "x",
            "tags": [],
            "limit": 2,
        }
    finally:
        server.should_exit = True
        await task


# --- documents, names and OpenAPI 3.0 ---------------------------------------------------------


def test_duplicate_names_within_a_document_are_a_configuration_error() -> None:
    document = {
        "openapi": "3.1.0",
        "servers": [{"url": BASE}],
        "paths": {
            "/a": {"get": {"operationId": "get.item"}},
            "/b": {"get": {"operationId": "get item"}},
        },
    }
    with pytest.raises(ToolSourceError, match=r"GET /b and GET /a both become the tool 'get_item'"):
        openapi_tools(document)


def test_long_names_are_cut_and_kept_apart() -> None:
    long = "x" * 70
    document = {
        "openapi": "3.1.0",
        "servers": [{"url": BASE}],
        "paths": {
            "/a": {"get": {"operationId": long + "a"}},
            "/b": {"get": {"operationId": long + "b"}},
        },
    }
    names = [t.name for t in openapi_tools(document)]
    assert len(set(names)) == 2
    assert all(len(n) <= 64 for n in names)


def test_a_document_needs_an_absolute_base_url(app: FastAPI) -> None:
    with pytest.raises(ToolSourceError, match="no absolute base URL"):
        openapi_tools(app.openapi())  # its server URL is "/v1"


def test_swagger_2_is_refused() -> None:
    with pytest.raises(ToolSourceError, match=r"only OpenAPI 3\.0 and 3\.1"):
        openapi_tools({"swagger": "2.0", "paths": {}}, base_url=BASE)


OPENAPI_30 = {
    "openapi": "3.0.3",
    "servers": [
        {"url": "https://{region}.api.test/v2", "variables": {"region": {"default": "eu"}}}
    ],
    "paths": {
        "/pets/{petId}": {
            "parameters": [{"$ref": "#/components/parameters/PetId"}],
            "put": {
                "operationId": "updatePet",
                "description": "Replace a pet.",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Dog"}}
                    },
                },
            },
            "get": {
                "parameters": [
                    {"name": "trace", "in": "cookie", "schema": {"type": "string"}},
                    {
                        "name": "age",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
                    },
                ]
            },
        },
        "/upload": {
            "post": {
                "operationId": "upload",
                "requestBody": {
                    "required": True,
                    "content": {"multipart/form-data": {"schema": {"type": "object"}}},
                },
            }
        },
    },
    "components": {
        "parameters": {
            "PetId": {
                "name": "petId",
                "in": "path",
                "required": True,
                "schema": {"type": "integer"},
            }
        },
        "schemas": {
            "Pet": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "nickname": {"type": "string", "nullable": True},
                    "parent": {"$ref": "#/components/schemas/Pet"},
                },
            },
            "Dog": {
                "allOf": [
                    {"$ref": "#/components/schemas/Pet"},
                    {"type": "object", "properties": {"barks": {"type": "boolean"}}},
                ]
            },
        },
    },
}


def test_openapi_30_schemas_become_json_schema() -> None:
    tools = by_name(openapi_tools(copy.deepcopy(OPENAPI_30)))
    assert set(tools) == {"updatePet", "get_pets_petId"}  # upload's body is multipart: left out

    update = tools["updatePet"].parameters
    assert update["required"] == ["petId", "body"]
    dog = update["properties"]["body"]
    assert dog["type"] == "object"  # allOf of plain objects merged
    assert set(dog["properties"]) == {"name", "nickname", "parent", "barks"}
    assert dog["required"] == ["name"]
    assert dog["properties"]["nickname"]["type"] == ["string", "null"]
    assert dog["properties"]["parent"] == {"description": "(recursive: Pet)"}

    get = tools["get_pets_petId"].parameters
    assert set(get["properties"]) == {"petId", "age"}  # no cookie parameter
    assert get["properties"]["age"] == {"type": "integer", "exclusiveMinimum": 0}

    tools["updatePet"].validate({"petId": 1, "body": {"name": "Rex", "nickname": None}})
    with pytest.raises(ToolArgumentsInvalid, match="age: 0 is less than or equal"):
        tools["get_pets_petId"].validate({"petId": 1, "age": 0})


async def test_openapi_30_call_uses_the_server_variables() -> None:
    seen: list[httpx.Request] = []

    async def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": True})

    async with httpx.AsyncClient(transport=httpx.MockTransport(record)) as client:
        tools = by_name(openapi_tools(copy.deepcopy(OPENAPI_30), client=client))
        result = await call(tools["updatePet"], {"petId": 3, "body": {"name": "Rex"}})
    assert result == {"ok": True}
    assert str(seen[0].url) == "https://eu.api.test/v2/pets/3"
    assert seen[0].method == "PUT"
    assert json.loads(seen[0].content) == {"name": "Rex"}


async def test_documents_load_from_json_and_yaml_files(tmp_path: Path, app: FastAPI) -> None:
    as_json = tmp_path / "shop.json"
    as_json.write_text(json.dumps(app.openapi()))
    as_yaml = tmp_path / "shop.yaml"
    as_yaml.write_text(
        "openapi: 3.1.0\nservers: [{url: 'http://api.test'}]\n"
        "paths:\n  /ping:\n    get: {operationId: ping, summary: Ping}\n"
    )
    assert (await load_openapi(as_json))["info"]["title"] == "shop"
    assert [t.name for t in openapi_tools(await load_openapi(as_yaml))] == ["ping"]
    with pytest.raises(ToolSourceError, match="No such file"):
        await load_openapi(tmp_path / "absent.json")
    with pytest.raises(ToolSourceError, match="an OpenAPI document is an object"):
        parse_document("- just\n- a list\n")
