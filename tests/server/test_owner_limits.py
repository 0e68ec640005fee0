"""Per-owner limits over HTTP and the WebSocket, on every store engine: over a limit the
answer is 429 with Retry-After and nothing is stored; another owner is not affected; a
slot comes back when its turn or stream ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from ostinato.identity.keys import create_key
from ostinato.identity.settings import AuthSettings, LimitSettings
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.base import Store
from tests.server.people import GatedModel, eventually
from tests.server.sse_client import open_stream
from tests.server.ws_client import Refused, open_websocket


@pytest.fixture
async def limited(runtime: Runtime) -> AsyncIterator[tuple[FastAPI, dict[str, str]]]:
    limits = LimitSettings(running_turns=1, turns_per_minute=3, open_streams=1, uploads_per_turn=1)
    app = create_app(runtime, auth=AuthSettings(mode="keys", limits=limits))
    keys = {who: (await create_key(runtime.store, who, "t"))[1] for who in ("ann", "bob")}
    yield app, {who: f"Bearer {key}" for who, key in keys.items()}
    await app.state.ostinato.aclose()


def _client(app: FastAPI, credential: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://test",
        headers={"authorization": credential},
    )


async def test_turns_per_minute(
    limited: tuple[FastAPI, dict[str, str]], model: ScriptedModel, runtime: Runtime
) -> None:
    app, auth = limited
    async with _client(app, auth["ann"]) as ann, _client(app, auth["bob"]) as bob:
        cid = (await ann.post("/v1/conversations")).json()["id"]
        for i in range(3):
            model.add(text_step(f"answer {i}"))
            done = await ann.post(f"/v1/conversations/{cid}/turns", json={"text": f"q{i}"})
            assert done.status_code == 200
        refused = await ann.post(f"/v1/conversations/{cid}/turns", json={"text": "one more"})
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "limit_exceeded"
        assert "a minute" in refused.json()["error"]["message"]
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        assert len(await runtime.store.list_messages(cid)) == 6  # the refused one is not kept
        theirs = (await bob.post("/v1/conversations")).json()["id"]
        model.add(text_step("bob's answer"))
        other = await bob.post(f"/v1/conversations/{theirs}/turns", json={"text": "hi"})
        assert other.status_code == 200


async def test_running_turns_at_once_and_the_slot_comes_back(store: Store) -> None:
    model = GatedModel()
    runtime = Runtime(store, model=model)
    limits = LimitSettings(running_turns=1)
    app = create_app(runtime, auth=AuthSettings(mode="keys", limits=limits))
    key = (await create_key(store, "ann", "t"))[1]
    async with _client(app, f"Bearer {key}") as ann:
        first = (await ann.post("/v1/conversations")).json()["id"]
        second = (await ann.post("/v1/conversations")).json()["id"]
        running = asyncio.ensure_future(
            ann.post(f"/v1/conversations/{first}/turns", json={"text": "go"})
        )

        async def first_runs() -> bool:
            return runtime.busy(first)

        await eventually(first_runs)
        busy = await ann.post(f"/v1/conversations/{second}/turns", json={"text": "too"})
        assert busy.status_code == 429 and busy.headers["retry-after"] == "5"
        assert "turns running at once" in busy.json()["error"]["message"]
        assert await store.list_messages(second) == []
        model.open_all()
        assert (await running).status_code == 200

        async def admitted() -> bool:
            response = await ann.post(f"/v1/conversations/{second}/turns", json={"text": "now"})
            return response.status_code == 200

        await eventually(admitted)
    await app.state.ostinato.aclose()
    await runtime.close()


async def test_open_streams_and_files_per_turn(limited: tuple[FastAPI, dict[str, str]]) -> None:
    app, auth = limited
    headers = {"authorization": auth["ann"]}
    async with _client(app, auth["ann"]) as ann:
        cid = (await ann.post("/v1/conversations")).json()["id"]
        events = f"/v1/conversations/{cid}/events"
        async with open_stream(app, "GET", events, headers=headers) as stream:
            assert stream.status == 200
            second = await ann.get(events)
            assert second.status_code == 429 and "retry-after" in second.headers
            with pytest.raises(Refused) as refused:
                async with open_websocket(app, f"/v1/conversations/{cid}/ws", headers=headers):
                    pass
            assert refused.value.status == 429

        async def reopened() -> bool:
            async with open_stream(app, "GET", events, headers=headers) as again:
                return again.status == 200

        await eventually(reopened)
        files = [("files", (f"f{i}.txt", b"hi", "text/plain")) for i in range(2)]
        many = await ann.post(
            f"/v1/conversations/{cid}/turns", data={"text": "two files"}, files=files
        )
        assert many.status_code == 429 and "at most 1" in many.json()["error"]["message"]
