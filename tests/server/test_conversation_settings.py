"""``PATCH /v1/conversations/{id}``: title, metadata, persona and model, each checked;
a model that cannot be built is a 4xx naming it (on PATCH, and on a turn), never a 500."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from ostinato.agents import AgentConfig
from ostinato.errors import InvalidRequest
from ostinato.models.base import Model
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.skills import Router, Skill
from ostinato.store.accounts import UpdateConversation
from ostinato.store.base import Store


@pytest.fixture
async def runtime(store: Store, model: ScriptedModel) -> AsyncIterator[Runtime]:
    """Two personas, and models by name: ``scripted:*`` is the scripted model, anything
    else cannot be built."""

    def models(name: str) -> Model:
        if name.startswith("scripted:") or name == "allegro":
            return model
        raise InvalidRequest(f"no provider key for {name.split(':')[0]!r}")

    router = Router(
        [
            Skill("assistant", AgentConfig(name="assistant")),
            Skill("chef", AgentConfig(name="chef"), persona="Chef"),
        ]
    )
    runtime = Runtime(store, model=model, router=router, models=models)
    yield runtime
    await runtime.close()


@pytest.fixture
async def client(runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        yield client


async def test_settings_change_and_what_is_left_out_stays(client: httpx.AsyncClient) -> None:
    cid = (
        await client.post("/v1/conversations", json={"title": "a", "metadata": {"k": 1}})
    ).json()["id"]
    path = f"/v1/conversations/{cid}"
    changed = await client.patch(path, json={"title": "b", "model": "scripted:x"})
    assert changed.status_code == 200
    body = changed.json()
    assert body["title"] == "b" and body["metadata"] == {"k": 1, "model": "scripted:x"}
    meta = (await client.patch(path, json={"metadata": {"z": 2}, "persona": "chef"})).json()
    assert meta["metadata"] == {"z": 2, "model": "scripted:x"} and meta["persona"] == "chef"
    cleared = (
        await client.patch(path, json={"model": None, "persona": None, "title": None})
    ).json()
    assert (
        cleared["metadata"] == {"z": 2} and cleared["persona"] is None and cleared["title"] is None
    )
    assert (await client.get(path)).json() == cleared


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"model": "openai:gpt-9"}, "the model 'openai:gpt-9' cannot be used: no provider key"),
        ({"persona": "pirate"}, "unknown persona 'pirate' (known: Chef)"),
        ({"title": "x" * 501}, "title"),
        ({"owner": "bob"}, "owner is not a known field"),
        ({"title": "a\x00b"}, "NUL"),
    ],
)
async def test_bad_settings_are_422(
    client: httpx.AsyncClient, body: dict[str, object], says: str
) -> None:
    cid = (await client.post("/v1/conversations")).json()["id"]
    response = await client.patch(f"/v1/conversations/{cid}", json=body)
    assert response.status_code == 422
    assert says in response.json()["error"]["message"]
    assert (await client.patch("/v1/conversations/nope", json={"title": "x"})).status_code == 404


async def test_a_stored_model_that_cannot_be_built_is_a_4xx_on_a_turn(
    client: httpx.AsyncClient, runtime: Runtime, model: ScriptedModel
) -> None:
    cid = (await client.post("/v1/conversations")).json()["id"]
    await runtime.store.write(UpdateConversation(cid, metadata={"model": "gone:model"}))
    turn = await client.post(f"/v1/conversations/{cid}/turns", json={"text": "hi"})
    assert turn.status_code == 422
    message = turn.json()["error"]["message"]
    assert "'gone:model' cannot be used" in message and "set another model" in message
    assert await runtime.store.list_messages(cid) == []  # nothing stored
    stream = await client.post(
        f"/v1/conversations/{cid}/turns",
        json={"text": "hi"},
        headers={"accept": "text/event-stream"},
    )
    assert stream.status_code == 422
    model.add(text_step("fixed"))
    await client.patch(f"/v1/conversations/{cid}", json={"model": "scripted:ok"})
    assert (
        await client.post(f"/v1/conversations/{cid}/turns", json={"text": "hi"})
    ).status_code == 200


async def test_the_persona_set_routes_the_next_turn(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    cid = (await client.post("/v1/conversations")).json()["id"]
    await client.patch(f"/v1/conversations/{cid}", json={"persona": "Chef"})
    model.add(text_step("yes chef"))
    turn = await client.post(f"/v1/conversations/{cid}/turns", json={"text": "dinner?"})
    assert turn.json()["messages"][0]["metadata"]["route"]["skill"] == "chef"
