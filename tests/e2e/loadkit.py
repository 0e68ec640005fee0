"""Pieces of ``bench/serve_load.py`` and of the load test (``test_load.py``): a loopback fake
OpenAI-compatible model and a small HTTP/1.1 client, both on bare asyncio streams so that
neither costs much CPU next to the server they measure.

The fake model answers ``POST /v1/chat/completions`` (streamed or not) and
``GET /v1/models``. It notes when each request arrived (``time.monotonic()``, the same
clock in every process on one Linux machine) under the marker the user's last message
starts with, and answers ``GET /arrivals`` with those times. Told the server's process ids
(``POST /watch``, a JSON list), it also notes the CPU time those processes had used when
each request had been read whole (``server_cpu``: nanoseconds, from every thread's
``schedstat``, so finer than the clock ticks of ``/proc/<pid>/stat``) and answers
``GET /cpu`` with them; ``server_cpu`` read by a client just before its POST makes the
difference the server's CPU from the POST to the model's request. A user message starting
with ``slow`` is answered with ``tokens`` chunks: the first ``first_token`` seconds after
the request, then one each ``1 / rate`` seconds; each token's text is the
``time.monotonic()`` at which it was written, so a client can tell how late it arrived.
Any other message gets one short chunk at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

TURN_TIMEOUT = 120.0
CHUNK_HEAD = '{"id":"c","object":"chat.completion.chunk","created":0,"model":"fake","choices":'


@dataclass
class FakeModel:
    first_token: float = 0.05
    rate: float = 20.0
    tokens: int = 20
    arrivals: dict[str, float] = field(default_factory=dict)
    requests: int = 0
    watched: list[int] = field(default_factory=list)
    cpu_at_request: dict[str, int] = field(default_factory=dict)

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return f"data: {CHUNK_HEAD}[{json.dumps(choice)}]}}\n\n".encode()

    async def _tokens(self, text: str) -> AsyncIterator[bytes]:
        yield self._chunk({"role": "assistant", "content": ""})
        if text.startswith("slow"):
            began = time.monotonic()
            for i in range(self.tokens):
                due = began + self.first_token + i / self.rate
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                yield self._chunk({"content": f"{time.monotonic():.6f} "})
        else:
            yield self._chunk({"content": "ok"})
        yield self._chunk({}, "stop")
        usage = {"prompt_tokens": 10, "completion_tokens": self.tokens, "total_tokens": 30}
        yield f'data: {CHUNK_HEAD}[],"usage":{json.dumps(usage)}}}\n\n'.encode()
        yield b"data: [DONE]\n\n"

    async def _completion(self, body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        content = users[-1].get("content", "") if users else ""
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        text = str(content)
        if not body.get("stream"):
            message = {"role": "assistant", "content": "ok"}
            reply = {"id": "c", "object": "chat.completion", "created": 0, "model": "fake"}
            reply["choices"] = [{"index": 0, "message": message, "finish_reason": "stop"}]
            reply["usage"] = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
            _respond(writer, 200, json.dumps(reply).encode())
            return
        head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        writer.write(f"{head}transfer-encoding: chunked\r\n\r\n".encode())
        async for piece in self._tokens(text):
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
        writer.write(b"0\r\n\r\n")

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                arrived = time.monotonic()
                method, path, _ = line.decode().split(" ", 2)
                headers = await _read_headers(reader)
                size = int(headers.get("content-length", "0"))
                raw = await reader.readexactly(size) if size else b""
                await self._route(method, path, raw, arrived, writer)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    async def _route(
        self, method: str, path: str, raw: bytes, arrived: float, writer: asyncio.StreamWriter
    ) -> None:
        if method == "POST" and path.endswith("/chat/completions"):
            self.requests += 1
            body = json.loads(raw)
            users = [m for m in body.get("messages", []) if m.get("role") == "user"]
            marker = str(users[-1].get("content", "")).split(" ", 1)[0] if users else ""
            self.arrivals.setdefault(marker, arrived)
            if self.watched:
                self.cpu_at_request.setdefault(marker, server_cpu(self.watched))
            await self._completion(body, writer)
        elif path.endswith("/models"):
            listing = {"object": "list", "data": [{"id": "fake", "object": "model"}]}
            _respond(writer, 200, json.dumps(listing).encode())
        elif path == "/arrivals":
            _respond(writer, 200, json.dumps(self.arrivals).encode())
        elif method == "POST" and path == "/watch":
            self.watched = [int(pid) for pid in json.loads(raw)]
            _respond(writer, 200, b"{}")
        elif path == "/cpu":
            _respond(writer, 200, json.dumps(self.cpu_at_request).encode())
        else:
            _respond(writer, 404, b'{"error":{"message":"not found"}}')


def server_cpu(pids: list[int]) -> int:
    """CPU nanoseconds the processes ``pids`` have used: every thread's ``schedstat``
    (a thread that ended is no longer counted, which the short runs here can bear)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(FileNotFoundError):
            for task in os.listdir(f"/proc/{pid}/task"):
                with (
                    contextlib.suppress(FileNotFoundError),
                    open(f"/proc/{pid}/task/{task}/schedstat") as stat,
                ):
                    total += int(stat.read().split()[0])
    return total


def _respond(writer: asyncio.StreamWriter, status: int, body: bytes) -> None:
    head = f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n"
    writer.write(f"{head}content-length: {len(body)}\r\n\r\n".encode() + body)


async def _read_headers(reader: asyncio.StreamReader) -> dict[str, str]:
    headers: dict[str, str] = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            return headers
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()


async def serve_fake(model: FakeModel, port: int = 0) -> asyncio.Server:
    return await asyncio.start_server(model.handle, "127.0.0.1", port, backlog=4096)


# --- the client ------------------------------------------------------------------------


def _serve_in_child(conn: Connection, make: Callable[[], FakeModel]) -> None:
    async def run() -> None:
        server = await serve_fake(make())
        conn.send(server.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    asyncio.run(run())


@contextlib.contextmanager
def fake_model_process(make: Callable[[], FakeModel] = FakeModel) -> Iterator[int]:
    """The fake model (``make()``) served in a process of its own, so that its work is
    not the measured process's; yields its port."""
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.Process(target=_serve_in_child, args=(child, make), daemon=True)
    process.start()
    try:
        yield int(parent.recv())
    finally:
        process.terminate()
        process.join()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run_and_send(
    conn: Connection, work: Callable[..., Awaitable[Any]], args: tuple[Any, ...]
) -> None:
    conn.send(asyncio.run(work(*args)))


def in_child(work: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    """``asyncio.run(work(*args))`` in a process of its own (a client whose CPU is not the
    measuring process's); what it returned."""
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.Process(target=_run_and_send, args=(child, work, args))
    process.start()
    result = parent.recv()
    process.join()
    return result


def wait_healthy(port: int, process: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    """Until ``ostinato serve`` on ``port`` answers ``/healthz``; ``SystemExit`` with its
    log if it exits first or does not answer within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"ostinato serve exited:\n{log.read_text()}")
        with contextlib.suppress(OSError):
            if asyncio.run(call(port, "GET", "/healthz"))[0] == 200:
                return
        time.sleep(0.05)
    raise SystemExit(f"no /healthz after {timeout:g} s:\n{log.read_text()}")


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank below; nan for none)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body, piece by piece (chunked or by content-length)."""
        if self.headers.get("transfer-encoding") == "chunked":
            while True:
                size = int((await self.reader.readline()).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readline()
                    return
                data = await self.reader.readexactly(size + 2)
                yield data[:-2]
        else:
            length = int(self.headers.get("content-length", "0"))
            yield await self.reader.readexactly(length)

    async def body(self) -> bytes:
        return b"".join([piece async for piece in self.chunks()])

    def close(self) -> None:
        self.writer.close()


async def request(
    port: int, method: str, path: str, body: Any = None, accept: str = "application/json"
) -> Response:
    """One request on a new connection to 127.0.0.1:port; the response once its head is in."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: {accept}\r\n"
    head += f"content-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n"
    writer.write(head.encode() + data)
    status = int((await reader.readline()).split(b" ")[1])
    return Response(status, await _read_headers(reader), reader, writer)


async def call(port: int, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """A JSON request and its decoded answer."""
    response = await request(port, method, path, body)
    try:
        raw = await response.body()
        return response.status, json.loads(raw) if raw else None
    finally:
        response.close()


async def sse_events(response: Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """The (event, data) pairs of an SSE body; comments are skipped."""
    buffer = b""
    async for piece in response.chunks():
        buffer += piece
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            name, data = "", ""
            for line in block.decode().split("\n"):
                if line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    data += line[5:].strip()
            if name:
                yield name, json.loads(data)


@dataclass
class Turn:
    """What the client saw of one streamed turn."""

    ok: bool = False
    why: str = ""
    first_token: float | None = None
    delays: list[float] = field(default_factory=list)
    tokens: int = 0


async def streaming_turn(port: int, cid: str, text: str) -> Turn:
    turn = Turn()
    sent = time.monotonic()
    path = f"/v1/conversations/{cid}/turns"
    response = await request(port, "POST", path, {"text": text}, accept="text/event-stream")
    try:
        if response.status != 200:
            turn.why = f"status {response.status}"
            return turn
        pending = ""
        async for name, data in sse_events(response):
            if name == "text.delta":
                now = time.monotonic()
                pending += data["text"]
                *done, pending = pending.split(" ")
                for token in done:
                    if token.strip():
                        turn.tokens += 1
                        turn.delays.append(now - float(token))
                        if turn.first_token is None:
                            turn.first_token = now - sent
            elif name == "error":
                turn.why = f"error frame {data.get('code')}"
                return turn
            elif name == "turn.finished":
                turn.ok = data.get("error") is None
                turn.why = "" if turn.ok else f"finished with {data.get('error')}"
                return turn
        turn.why = "stream ended before turn.finished"
        return turn
    finally:
        response.close()


async def conversations(port: int, n: int) -> list[str]:
    ids: list[str] = []
    for start in range(0, n, 50):
        batch = [call(port, "POST", "/v1/conversations", {}) for _ in range(min(50, n - start))]
        for status, body in await asyncio.gather(*batch):
            assert status == 201, (status, body)
            ids.append(body["id"])
    return ids


async def bounded(port: int, cid: str, text: str) -> Turn:
    try:
        return await asyncio.wait_for(streaming_turn(port, cid, text), TURN_TIMEOUT)
    except (TimeoutError, OSError, ValueError) as error:
        return Turn(why=f"{type(error).__name__}: {error}")
