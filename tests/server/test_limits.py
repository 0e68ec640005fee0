"""Body limits: every route refuses an oversized body with 413 before reading it whole,
by the kind of body (message, metadata, upload), and nothing of it is stored."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.server import BodyLimits, create_app
from tests.server.ws_client import open_websocket

LIMITS = BodyLimits(message_bytes=4096, metadata_bytes=1024, upload_bytes=16384)
CHUNK = 512


@pytest.fixture
def app(runtime: Runtime) -> FastAPI:
    return create_app(runtime, model_name="scripted:model", store_name="test", limits=LIMITS)


class Chunks:
    """A body sent in pieces with no Content-Length (chunked on a real socket); counts
    how much of it the server asked for."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self.body), CHUNK):
            piece = self.body[start : start + CHUNK]
            self.sent += len(piece)
            yield piece


def _too_large(response: httpx.Response, kind: str, limit: int) -> None:
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["code"] == "too_large"
    assert error["kind"] == kind and error["limit_bytes"] == limit
    assert f"{limit} bytes" in error["message"]


async def test_a_declared_oversized_message_is_refused_unread(
    client: httpx.AsyncClient, conversation_id: str, runtime: Runtime
) -> None:
    body = json.dumps({"text": "x" * 10_000})
    response = await client.post(
        f"/v1/conversations/{conversation_id}/turns",
        content=body,
        headers={"content-type": "application/json"},
    )
    _too_large(response, "message", 4096)
    assert await runtime.store.list_messages(conversation_id) == []


async def test_a_chunked_message_is_cut_off_at_the_limit(
    client: httpx.AsyncClient, conversation_id: str, runtime: Runtime
) -> None:
    body = Chunks(json.dumps({"text": "x" * 100_000}).encode())
    response = await client.post(
        f"/v1/conversations/{conversation_id}/turns",
        content=body,
        headers={"content-type": "application/json"},
    )
    _too_large(response, "message", 4096)
    assert body.sent <= 4096 + CHUNK  # the rest was never read
    assert await runtime.store.list_messages(conversation_id) == []
    assert (await runtime.conversation(conversation_id)).state == "idle"


async def test_metadata_has_its_own_smaller_limit(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    body = Chunks(json.dumps({"metadata": {"notes": "x" * 5_000}}).encode())
    response = await client.post(
        "/v1/conversations", content=body, headers={"content-type": "application/json"}
    )
    _too_large(response, "metadata", 1024)
    assert await runtime.store.list_conversations() == []
    small = await client.post("/v1/conversations", json={"metadata": {"notes": "short"}})
    assert small.status_code == 201


async def test_an_upload_has_its_own_larger_limit(
    client: httpx.AsyncClient, conversation_id: str, runtime: Runtime, model: ScriptedModel
) -> None:
    url = f"/v1/conversations/{conversation_id}/turns"
    # over the message limit but under the upload limit: a multipart turn is an upload
    model.add(text_step("read it"))
    fits = await client.post(
        url, data={"text": "see"}, files=[("files", ("a.txt", b"y" * 8000, "text/plain"))]
    )
    assert fits.status_code == 200, fits.text
    rows = len(await runtime.store.list_messages(conversation_id))
    over = await client.post(
        url, data={"text": "see"}, files=[("files", ("a.txt", b"y" * 20_000, "text/plain"))]
    )
    _too_large(over, "upload", 16384)
    assert len(await runtime.store.list_messages(conversation_id)) == rows


async def test_every_route_is_bounded(client: httpx.AsyncClient, conversation_id: str) -> None:
    big = json.dumps({"decision": "approve", "pad": "x" * 10_000}).encode()
    headers = {"content-type": "application/json"}
    reading = [
        ("POST", f"/v1/conversations/{conversation_id}/approvals/a1"),
        ("POST", "/v1/memories"),
        ("PUT", "/v1/tools/clock"),
    ]
    for method, path in reading:
        chunked = Chunks(big)
        response = await client.request(method, path, content=chunked, headers=headers)
        _too_large(response, "message", 4096)
        assert chunked.sent <= 4096 + CHUNK
        declared = await client.request(method, path, content=big, headers=headers)
        _too_large(declared, "message", 4096)
    # a route that takes no body is refused by a declared length, and never reads one
    for method, path in [("GET", "/v1/conversations"), ("POST", "/no/such/route")]:
        declared = await client.request(method, path, content=big, headers=headers)
        _too_large(declared, "message", 4096)
        chunked = Chunks(big)
        response = await client.request(method, path, content=chunked, headers=headers)
        assert response.status_code in (200, 404) and chunked.sent <= CHUNK


def test_the_kind_of_a_body_follows_its_route_and_type() -> None:
    limits = BodyLimits()
    turns = "/v1/conversations/c1/turns"
    assert limits.kind_of("POST", turns, "application/json") == "message"
    assert limits.kind_of("POST", turns, "multipart/form-data; boundary=x") == "upload"
    assert limits.kind_of("POST", "/v1/conversations", "application/json") == "metadata"
    assert limits.kind_of("PATCH", "/v1/conversations/c1", "application/json") == "metadata"
    assert limits.kind_of("POST", "/v1/memories", "application/json") == "message"
    with pytest.raises(ValueError, match="message_bytes"):
        BodyLimits(message_bytes=0)


async def test_a_websocket_message_over_the_limit_is_refused(
    app: FastAPI, conversation_id: str, runtime: Runtime
) -> None:
    async with open_websocket(app, f"/v1/conversations/{conversation_id}/ws") as socket:
        await socket.send_json({"type": "message", "text": "x" * 5000})
        reply = await socket.receive_json()
    assert reply == {
        "type": "error",
        "code": "too_large",
        "message": "the message is over the 4096-byte limit",
    }
    assert await runtime.store.list_messages(conversation_id) == []
