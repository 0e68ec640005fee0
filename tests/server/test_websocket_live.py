"""The WebSocket under a real uvicorn (``uvicorn[standard]``), with the ``websockets``
client: the handshake, the Origin check as an HTTP 403, and a turn both ways."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator

import pytest
import uvicorn
from fastapi import FastAPI
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from tests.server.people import eventually


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
async def served(app: FastAPI) -> AsyncIterator[int]:
    port = _free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, lifespan="off", log_level="critical", log_config=None
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started:
            break
        await asyncio.sleep(0.01)
    assert server.started, "uvicorn did not start"
    yield port
    server.should_exit = True
    await asyncio.wait_for(task, 10)


@pytest.mark.parametrize("store", ["memory"], indirect=True)
async def test_a_turn_over_a_real_websocket(
    served: int, runtime: Runtime, model: ScriptedModel
) -> None:
    model.add(text_step("Hi from the socket."))
    cid = (await runtime.create_conversation()).id
    url = f"ws://127.0.0.1:{served}/v1/conversations/{cid}/ws"
    with pytest.raises(InvalidStatus) as refused:
        async with connect(url, origin="http://evil.example"):  # type: ignore[arg-type]
            pass
    assert refused.value.response.status_code == 403
    assert json.loads(refused.value.response.body or b"{}")["error"]["code"] == "forbidden"
    with pytest.raises(InvalidStatus) as missing:
        async with connect(url.replace(cid, "nope")):
            pass
    assert missing.value.response.status_code == 404

    same_host = f"http://127.0.0.1:{served}"
    async with connect(url, origin=same_host) as ws:  # type: ignore[arg-type]
        await ws.send(json.dumps({"type": "message", "text": "hello", "client_message_id": "w"}))
        frames = []
        while not frames or frames[-1]["type"] != "turn.finished":
            frames.append(json.loads(await asyncio.wait_for(ws.recv(), 5)))
    assert frames[1]["client_message_id"] == "w"
    assert frames[-1]["stop_reason"] == "end_turn"

    async def unwatched() -> bool:
        return runtime.bus.subscriber_count(cid) == 0

    await eventually(unwatched)  # the client closed: the server let go of the stream
