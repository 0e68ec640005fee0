"""The floors ``bench/serve_load.py`` measures ostinato against: a bare Starlette app that
does the least a chat server can do per turn.

``POST /v1/conversations`` answers an id; ``POST /v1/conversations/{id}/turns`` sends the
model an 18.5 KB Chat Completions request (the size of ostinato's own: its system prompt
and tools) with the turn's text, and relays each streamed token as an SSE ``text.delta``
frame, then ``turn.finished``. Nothing is stored. The model client is one of:

- ``socket``: a bare asyncio socket per call (the request written by hand, the chunked
  SSE body read and each ``data:`` line decoded with ``json.loads``): the floor;
- ``httpx``: the ``openai`` SDK on its default HTTP client (``httpx2``), as ostinato
  used it before issue 32;
- ``aiohttp``: the ``openai`` SDK on its aiohttp transport (``DefaultAioHttpClient``),
  as ostinato used it from issue 32's first round;
- ``lean``: ostinato's own lean streamed call (``ostinato.models.sse_http.Channel``:
  aiohttp directly, the events parsed by ostinato), the client its deployment's
  Chat Completions models use now.

Run: ``python bench/floor.py --port P --client socket`` with ``OSTINATO_BASE_URL`` set to
the model's ``http://host:port/v1``; uvicorn serves it (one process, its defaults).
"""

from __future__ import annotations

import argparse
import json
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

PADDING = "You are a helpful assistant. " * 640  # ~18.5 KB with the rest of the request


def body_for(text: str) -> bytes:
    messages = [{"role": "system", "content": PADDING}, {"role": "user", "content": text}]
    request = {"model": "fake", "messages": messages, "stream": True}
    request["stream_options"] = {"include_usage": True}
    return json.dumps(request).encode()


def contents(chunk: Any) -> Iterator[str]:
    """A ``chat.completion.chunk``'s content deltas (the floors relay nothing else)."""
    for choice in chunk["choices"]:
        content = choice["delta"].get("content")
        if content:
            yield content


async def socket_tokens(base_url: str, text: str) -> AsyncIterator[str]:
    """The model's content deltas over a bare asyncio connection (one per call)."""
    import asyncio

    url = urlsplit(base_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    try:
        body = body_for(text)
        head = f"POST {url.path}/chat/completions HTTP/1.1\r\nhost: {url.netloc}\r\n"
        head += f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        writer.write(head.encode() + body)
        while (await reader.readline()) not in (b"\r\n", b""):
            pass  # the status line and headers
        buffer = b""
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                return
            buffer += (await reader.readexactly(size + 2))[:-2]
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                data = event[6:]
                if data == b"[DONE]":
                    return
                for content in contents(json.loads(data)):
                    yield content
    finally:
        writer.close()


def sdk_tokens(base_url: str, transport: str) -> Callable[[str], AsyncIterator[str]]:
    """The model's content deltas through the ``openai`` SDK (its generic ``post``, the
    chunks kept as JSON, as ostinato calls it) on ``transport``."""
    import httpx2
    import openai

    timeout = httpx2.Timeout(30.0, connect=10.0)
    http = openai.DefaultAioHttpClient(timeout=timeout) if transport == "aiohttp" else None
    client = openai.AsyncOpenAI(
        api_key="no-key", base_url=base_url, max_retries=0, timeout=timeout, http_client=http
    )

    async def tokens(text: str) -> AsyncIterator[str]:
        stream = await client.post(
            "/chat/completions",
            content=body_for(text),
            cast_to=object,
            stream=True,
            stream_cls=openai.AsyncStream[object],
        )
        try:
            async for chunk in stream:
                assert isinstance(chunk, dict)
                for content in contents(chunk):
                    yield content
        finally:
            await stream.close()

    return tokens


def lean_tokens(base_url: str) -> Callable[[str], AsyncIterator[str]]:
    """The model's content deltas through ostinato's lean streamed call."""
    import openai

    from ostinato.models.channels import channel_for
    from ostinato.models.failures import Endpoint

    client = openai.AsyncOpenAI(api_key="no-key", base_url=base_url, max_retries=0, timeout=30.0)
    channel = channel_for(client, Endpoint("floor", None, 30.0))

    async def tokens(text: str) -> AsyncIterator[str]:
        events = await channel.post("/chat/completions", body_for(text))
        try:
            async for chunk in events:
                for content in contents(chunk):
                    yield content
        finally:
            await events.close()

    return tokens


def app(kind: str, base_url: str) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    if kind == "socket":

        def tokens(text: str) -> AsyncIterator[str]:
            return socket_tokens(base_url, text)
    elif kind == "lean":
        tokens = lean_tokens(base_url)
    else:
        tokens = sdk_tokens(base_url, kind)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def conversation(request: Request) -> Response:
        return JSONResponse({"id": str(uuid.uuid4())}, status_code=201)

    async def turn(request: Request) -> Response:
        text = (await request.json())["text"]

        async def frames() -> AsyncIterator[bytes]:
            async for token in tokens(text):
                yield b"event: text.delta\ndata: %s\n\n" % json.dumps({"text": token}).encode()
            yield b'event: turn.finished\ndata: {"error": null}\n\n'

        return StreamingResponse(frames(), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/v1/conversations", conversation, methods=["POST"]),
            Route("/v1/conversations/{cid}/turns", turn, methods=["POST"]),
        ]
    )


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--client", choices=("socket", "httpx", "aiohttp", "lean"), default="socket"
    )
    args = parser.parse_args()
    served = app(args.client, os.environ["OSTINATO_BASE_URL"])
    uvicorn.run(served, host="127.0.0.1", port=args.port, log_level="warning", backlog=4096)


if __name__ == "__main__":
    main()
