"""Issue 10 items 1 and 2, black-box against ``ostinato serve`` on SQLite and PostgreSQL:
oversized bodies are refused with 413 before they are read, chunked or not, on every
kind of body; nothing is stored and the server's memory does not grow with the body
(psutil reads its RSS); integers past their columns are a 422, never a 500."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import psutil
import pytest
import websockets

from tests.e2e.hostile import post_chunked, serving

BIG = 50 * 1024 * 1024  # what the issue sent
GROWTH = 16 * 1024 * 1024  # an RSS rise well under the body's size: it was not buffered


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_fifty_megabyte_bodies_are_refused_unread(engine: str, tmp_path: Path) -> None:
    with serving(engine, tmp_path) as server:
        assert server.pid is not None
        process = psutil.Process(server.pid)
        cid = server.post("/v1/conversations").json()["id"]
        turns = f"/v1/conversations/{cid}/turns"
        # What serve loads once after it starts (server.app.prepare: the MCP SDK, in a
        # thread) is in memory before the measure: /mcp's first request waits for it.
        assert server.post("/mcp", {}).status_code < 500
        before = process.memory_info().rss

        message = post_chunked(
            server.url, turns, "application/json", b'{"text": "', BIG, filler=b"spam "
        )
        assert message.status == 413, message.body
        error = message.json()["error"]
        assert error["code"] == "too_large" and error["kind"] == "message"
        assert str(error["limit_bytes"]) in error["message"]
        assert message.sent < BIG  # the server answered long before the end

        metadata = post_chunked(
            server.url, "/v1/conversations", "application/json", b'{"metadata": {"a": "', BIG
        )
        assert metadata.status == 413 and metadata.json()["error"]["kind"] == "metadata"

        boundary = "b0undary"
        form_head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="text"\r\n\r\nhi\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; '
            'filename="big.txt"\r\nContent-Type: text/plain\r\n\r\n'
        ).encode()
        kind = f"multipart/form-data; boundary={boundary}"
        upload = post_chunked(server.url, turns, kind, form_head, BIG)
        assert upload.status == 413 and upload.json()["error"]["kind"] == "upload"

        declared = httpx.post(
            f"{server.url}{turns}",
            content=b"x" * (2 * 1024 * 1024),
            headers={"content-type": "application/json"},
            timeout=60,
        )
        assert declared.status_code == 413 and declared.json()["error"]["kind"] == "message"

        assert asyncio.run(_websocket_close_code(server.url, cid)) == 1009  # too big

        grown = process.memory_info().rss - before
        assert grown < GROWTH, f"RSS grew by {grown} bytes"
        assert server.get(f"/v1/conversations/{cid}/messages").json()["messages"] == []
        listed = server.get("/v1/conversations").json()["conversations"]
        assert [c["id"] for c in listed] == [cid]  # the oversized one was never made
        _integers_past_their_columns_are_422(server.url, cid)
        # and the server still serves ordinary requests
        ok = server.post(turns, {"text": "hello"})
        assert ok.status_code == 200 and ok.json()["stop_reason"] == "end_turn"
        assert json.loads(ok.text)["messages"][0]["blocks"][0]["text"] == "hello"


async def _websocket_close_code(url: str, cid: str) -> int | None:
    """Send one 2 MiB message on the conversation's WebSocket; the close code it gets."""
    ws_url = url.replace("http://", "ws://") + f"/v1/conversations/{cid}/ws?deltas=false"
    async with websockets.connect(ws_url, max_size=None) as socket:
        await socket.send(json.dumps({"type": "message", "text": "x" * (2 * 1024 * 1024)}))
        try:
            while True:
                await asyncio.wait_for(socket.recv(), 30)
        except websockets.ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd is not None else None


def _integers_past_their_columns_are_422(url: str, cid: str) -> None:
    base = f"{url}/v1/conversations/{cid}"
    for value in ("2147483648", "9223372036854775808"):
        for path in ("messages", "events"):
            response = httpx.get(f"{base}/{path}", params={"after_seq": value}, timeout=30)
            assert response.status_code == 422, (path, value, response.text)
        header = httpx.get(f"{base}/events", headers={"last-event-id": value}, timeout=30)
        assert header.status_code == 422, (value, header.text)
    top = httpx.get(f"{base}/messages", params={"after_seq": "2147483647"}, timeout=30)
    assert top.status_code == 200
