"""``/healthz``, ``/v1/models``, ``/openapi.json``, the lifespan, and the error shape of
everything that is not a route's own error."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
from fastapi import FastAPI

from ostinato.messages import Message, TextBlock
from ostinato.models.choice import DefaultModel, Tiers, describe_models
from ostinato.models.scripted import ScriptedModel
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.server.loops import loop_name
from ostinato.store.base import AppendMessage, StartTurn, Turn, utcnow
from ostinato.store.memory import MemoryStore


class BrokenStore(MemoryStore):
    async def list_conversations(self, **kwargs: Any) -> Any:
        raise ConnectionError("database is gone")

    async def get_conversation(self, conversation_id: str) -> Any:
        raise RuntimeError("a bug")


def _client(app: FastAPI) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://test")


async def test_healthz_and_models(client: httpx.AsyncClient) -> None:
    health = await client.get("/healthz")
    assert health.status_code == 200
    body = health.json()
    load = body.pop("load")
    assert body == {"status": "ok", "store": "test", "detail": None, "model_server": None}
    assert load["turns_running"] == 0 and load["turns_waiting"] == 0
    assert load["loop_lag_ms"] >= 0 and load["loop_lag_max_ms"] >= 0
    assert load["loop"] == loop_name(asyncio.get_running_loop())  # the one the test runs on
    live = await client.get("/livez")
    assert live.status_code == 200 and live.json() == {"status": "alive", "draining": False}
    models = (await client.get("/v1/models")).json()
    assert models == {
        "object": "list",
        "data": [
            {
                "id": "ostinato",
                "object": "model",
                "owned_by": "ostinato",
                "ostinato": {"agent": "default", "default": True, "choosable": True},
            },
            {
                "id": "default",
                "object": "model",
                "owned_by": "ostinato",
                "ostinato": {
                    "agent": "default",
                    "persona": None,
                    "description": "",
                    "choosable": True,
                },
            },
            {
                "id": "scripted:model",
                "object": "model",
                "owned_by": "scripted",
                "ostinato": {"default": True, "choosable": True},
            },
        ],
    }


async def test_openapi_describes_every_route(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    paths = document["paths"]
    assert set(paths) >= {
        "/healthz",
        "/v1/models",
        "/v1/conversations",
        "/v1/conversations/{conversation_id}",
        "/v1/conversations/{conversation_id}/messages",
        "/v1/conversations/{conversation_id}/turns",
        "/v1/conversations/{conversation_id}/events",
    }
    turn = paths["/v1/conversations/{conversation_id}/turns"]["post"]
    assert set(turn["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
    assert turn["responses"]["422"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "ErrorBody"
    )
    events = paths["/v1/conversations/{conversation_id}/events"]["get"]
    assert "text/event-stream" in events["responses"]["200"]["content"]


async def test_unknown_routes_and_methods_answer_json(client: httpx.AsyncClient) -> None:
    missing = await client.get("/v1/nothing")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    wrong = await client.delete("/v1/conversations")
    assert wrong.status_code == 405
    assert wrong.json()["error"]["code"] == "method_not_allowed"


async def test_unexpected_errors_are_a_generic_500_and_healthz_503() -> None:
    app = create_app(Runtime(BrokenStore(), model=ScriptedModel()))
    async with _client(app) as client:
        failed = await client.get("/v1/conversations/x")
        assert failed.status_code == 500
        assert failed.json() == {
            "error": {
                "code": "internal_error",
                "message": "internal server error; see the server log",
            }
        }
        health = await client.get("/healthz")
        assert health.status_code == 503
        assert health.json()["status"] == "unavailable"
        assert "database is gone" in health.json()["detail"]


async def test_hidden_rows_only_on_request(
    client: httpx.AsyncClient, runtime: Runtime, conversation_id: str
) -> None:
    await runtime.store.write(
        AppendMessage(conversation_id, Message("user", (TextBlock("shown"),))),
        AppendMessage(conversation_id, Message("system", (TextBlock("note"),), hidden=True)),
    )
    url = f"/v1/conversations/{conversation_id}/messages"
    shown = (await client.get(url)).json()["messages"]
    assert [m["blocks"][0]["text"] for m in shown] == ["shown"]
    everything = (await client.get(url, params={"include_hidden": "true"})).json()["messages"]
    assert [m["hidden"] for m in everything] == [False, True]


async def test_lifespan_recovers_crashed_turns_and_closes_the_runtime() -> None:
    store = MemoryStore()
    runtime = Runtime(store, model=ScriptedModel())
    conversation = await runtime.create_conversation()
    turn = Turn("t1", conversation.id, "r1", "running", utcnow())
    await store.write(StartTurn(turn))
    app = create_app(runtime)
    async with app.router.lifespan_context(app):
        recovered = await store.get_turn("t1")
        assert recovered is not None and recovered.stop_reason == "interrupted"


async def test_models_lists_each_model_once_with_the_tiers_it_serves(runtime: Runtime) -> None:
    listing = describe_models(
        DefaultModel("offline:ostinato", "nothing else answers"),
        Tiers(
            {"minuet": "offline:ostinato", "allegro": "openai-chat:m", "forte": "offline:ostinato"}
        ),
    )
    app = create_app(runtime, model_name="offline:ostinato", models=listing)
    async with _client(app) as client:
        models = (await client.get("/v1/models")).json()
    ids = [m["id"] for m in models["data"]]
    assert ids == ["ostinato", "default", "offline:ostinato", "openai-chat:m"]
    first, second = models["data"][2:]
    assert first["ostinato"] == {
        "default": True,
        "reason": "nothing else answers",
        "tiers": ["minuet", "forte"],
        "choosable": True,
    }
    assert second["ostinato"] == {"tiers": ["allegro"], "choosable": True}
    assert second["owned_by"] == "openai-chat"


async def test_the_docs_page_loads_nothing_from_another_host(client: httpx.AsyncClient) -> None:
    page = await client.get("/docs")
    assert page.status_code == 200
    html = page.text
    assert "SwaggerUIBundle" in html and '"validatorUrl": null' in html
    assert "http://" not in html and "https://" not in html and "//cdn" not in html
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sources and all(s.startswith("/docs/assets/") for s in sources), sources
    for source in sources:
        asset = await client.get(source)
        assert asset.status_code == 200 and len(asset.content) > 500, source
    assert (await client.get("/redoc")).status_code == 404  # ReDoc would need a CDN
