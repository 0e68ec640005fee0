"""A caller picks only the models the operator lists (issue 25, item 5): before, the
``x-ostinato-model-id`` header, a conversation's ``model`` (``PATCH``, or
``metadata.model`` when it is made) and the chat-completions ``model`` ran any model on
the deployment's key. ``GET /v1/models`` says which a caller may choose."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.requests import Request

from ostinato.models.allowed import ModelChoices
from ostinato.models.base import Model
from ostinato.models.choice import Tiers
from ostinato.models.offline import OfflineModel
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.memory import MemoryStore

TIERS = Tiers({"minuet": "offline:small", "allegro": "offline:ostinato", "forte": "offline:big"})
O1 = "openai:o1-pro"


def _models(name: str) -> Model:
    return OfflineModel()


def _choose(request: Request) -> Model | None:
    return OfflineModel() if request.headers.get("x-ostinato-model-id") else None


def _client(choices: ModelChoices) -> httpx.AsyncClient:
    runtime = Runtime(MemoryStore(), model=OfflineModel(), models=_models)
    listing = {
        "object": "list",
        "data": [
            {
                "id": "offline:ostinato",
                "object": "model",
                "owned_by": "offline",
                "ostinato": {"default": True},
            },
            *(
                {"id": i, "object": "model", "owned_by": "offline", "ostinato": {"tier": t}}
                for t, i in TIERS.mapping.items()
            ),
        ],
    }
    app = create_app(
        runtime,
        model_name="offline:ostinato",
        models=listing,
        choose_model=_choose,
        resolve_model=_models,
        choices=choices,
    )
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with _client(ModelChoices.of(["minuet", "allegro"], TIERS, "offline:ostinato")) as c:
        yield c


def _refused(answer: httpx.Response) -> None:
    assert answer.status_code == 403, answer.text
    error = answer.json()["error"]
    assert error["code"] == "model_not_allowed"
    assert "choose one of: minuet, allegro" in error["message"]
    assert error["details"] == [{"choosable": ["minuet", "allegro"]}]


async def test_a_model_header_outside_the_list_is_a_403(client: httpx.AsyncClient) -> None:
    cid = (await client.post("/v1/conversations")).json()["id"]
    url = f"/v1/conversations/{cid}/turns"
    _refused(await client.post(url, json={"text": "hi"}, headers={"x-ostinato-model-id": O1}))
    forte = await client.post(url, json={"text": "hi"}, headers={"x-ostinato-model-id": "forte"})
    _refused(forte)
    ok = await client.post(url, json={"text": "hi"}, headers={"x-ostinato-model-id": "minuet"})
    assert ok.status_code == 200, ok.text


async def test_a_conversations_model_outside_the_list_is_a_403(client: httpx.AsyncClient) -> None:
    _refused(await client.post("/v1/conversations", json={"metadata": {"model": O1}}))
    cid = (await client.post("/v1/conversations")).json()["id"]
    _refused(await client.patch(f"/v1/conversations/{cid}", json={"model": O1}))
    _refused(await client.patch(f"/v1/conversations/{cid}", json={"model": "offline:big"}))
    kept = await client.patch(f"/v1/conversations/{cid}", json={"model": "allegro"})
    assert kept.status_code == 200 and kept.json()["metadata"]["model"] == "allegro"


async def test_the_chat_completions_model_outside_the_list_is_a_403(
    client: httpx.AsyncClient,
) -> None:
    body = {"model": "offline:big", "messages": [{"role": "user", "content": "hi"}]}
    answer = await client.post("/v1/chat/completions", json=body)
    assert answer.status_code == 403, answer.text
    assert "choose one of: minuet, allegro" in answer.json()["error"]["message"]
    body["model"] = "offline:small"
    assert (await client.post("/v1/chat/completions", json=body)).status_code == 200


async def test_the_listing_says_what_a_caller_may_choose(client: httpx.AsyncClient) -> None:
    listing = (await client.get("/v1/models")).json()["data"]
    choosable = {m["id"]: m["ostinato"]["choosable"] for m in listing}
    assert choosable == {
        "ostinato": True,  # the default agent
        "default": True,  # the runtime's one agent, by its id
        "offline:ostinato": True,  # allegro's
        "offline:small": True,  # minuet's
        "offline:big": False,  # forte's: not listed
    }


async def test_listed_ids_beyond_the_tiers_are_listed_and_a_callers_key_may_lift_it() -> None:
    choices = ModelChoices.of(["minuet", O1], TIERS, "offline:ostinato", own_key_lifts=True)
    async with _client(choices) as client:
        listing = (await client.get("/v1/models")).json()["data"]
        assert {
            "id": O1,
            "object": "model",
            "owned_by": "openai",
            "ostinato": {"choosable": True},
        } in listing
        cid = (await client.post("/v1/conversations")).json()["id"]
        url = f"/v1/conversations/{cid}/turns"
        headers = {"x-ostinato-model-id": "openai:gpt-5"}
        assert (await client.post(url, json={"text": "a"}, headers=headers)).status_code == 403
        headers["x-ostinato-model-api-key"] = "the caller's own key"
        assert (await client.post(url, json={"text": "a"}, headers=headers)).status_code == 200
