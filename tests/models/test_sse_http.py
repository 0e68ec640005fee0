"""``ostinato.models.sse_http``: the lean streamed call (issue 32).

The event parser against the event stream format's corner cases, and the ``Channel``
against a bare HTTP/1.1 server written here (so the test sees connections: a stream read
to ``[DONE]`` gives its connection back for the next call, one closed early is closed, and
a reader that is busy while the provider sends is not failed as idle). The adapters' own
behaviours through it (errors, retries, redaction, the idle timeout) are run against the
strict fakes in ``test_transport``.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import AsyncIterator

import openai
import pytest

from ostinato.errors import StreamIdle
from ostinato.models.channels import channel_for, json_body
from ostinato.models.failures import Endpoint
from ostinato.models.sse_http import Channel, EventParser

GUARD = 30.0  # a test that would hang fails instead (not a measurement)


def parse(*chunks: bytes) -> list[tuple[bytes | None, bytes]]:
    parser = EventParser()
    return [event for chunk in chunks for event in parser.feed(chunk)]


def test_one_line_events_and_their_names() -> None:
    assert parse(b'data: {"a":1}\n\ndata:{"b":2}\n\n') == [(None, b'{"a":1}'), (None, b'{"b":2}')]
    named = b"event: message_start\ndata: {}\n\n"
    assert parse(named) == [(b"message_start", b"{}")]


def test_every_line_ending_and_events_cut_anywhere() -> None:
    stream = b"data: one\r\n\r\ndata: two\r\rdata: three\n\n"
    expected = [(None, b"one"), (None, b"two"), (None, b"three")]
    assert parse(stream) == expected
    for cut in range(1, len(stream)):  # a "\r\n" split between chunks is one line end
        assert parse(stream[:cut], stream[cut:]) == expected, cut
    assert parse(*(stream[i : i + 1] for i in range(len(stream)))) == expected


def test_data_lines_join_and_what_is_not_data_is_skipped() -> None:
    block = b": keep-alive\n\nid: 7\nretry: 10\n\ndata: a\ndata:b\ndata:  c\nevent: x\n\n"
    assert parse(block) == [(b"x", b"a\nb\n c")]  # one space after the colon is dropped
    assert parse(b"data: held back") == []  # no blank line yet: not an event


# --- a bare HTTP/1.1 server ---------------------------------------------------------------


class Bare:
    """Answers each POST with the given SSE body, chunked, on keep-alive connections;
    counts connections and notes when each closes."""

    def __init__(
        self, events: list[bytes], gap: float = 0.0, gzip: bool = False, drop: bool = False
    ) -> None:
        self.events = events
        self.gap = gap
        self.gzip = gzip
        self.drop = drop  # the connection dropped after the events, the body unfinished
        self.connections = 0
        self.heads: list[bytes] = []  # each request's head as it came
        self.closed = asyncio.Event()
        self.port = 0

    async def __aenter__(self) -> Bare:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                self.heads.append(head)
                size = next(
                    int(line.split(b":")[1])
                    for line in head.lower().split(b"\r\n")
                    if line.startswith(b"content-length:")
                )
                await reader.readexactly(size)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    + (b"content-encoding: gzip\r\n" if self.gzip else b"")
                    + b"transfer-encoding: chunked\r\n\r\n"
                )
                packer = zlib.compressobj(wbits=31)  # gzip, flushed event by event
                for event in self.events:
                    if self.gzip:
                        event = packer.compress(event) + packer.flush(zlib.Z_SYNC_FLUSH)
                    writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                    await writer.drain()
                    await asyncio.sleep(self.gap)
                if self.drop:
                    break
                if self.gzip:
                    end = packer.flush()
                    writer.write(b"%x\r\n%s\r\n" % (len(end), end))
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.closed.set()
            writer.close()


def channel_to(port: int, idle: float = 5.0) -> Channel:
    client = openai.AsyncOpenAI(
        api_key="k", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, timeout=idle
    )
    return channel_for(client, Endpoint("bare", "k", idle))


def chunk(text: str) -> bytes:
    return b"data: %s\n\n" % json.dumps({"choices": [{"delta": {"content": text}}]}).encode()


async def texts(events: AsyncIterator[dict[str, object]]) -> list[str]:
    return [c["choices"][0]["delta"]["content"] async for c in events]  # type: ignore[index]


async def test_a_stream_read_to_done_gives_its_connection_back() -> None:
    async with Bare([chunk("a"), chunk("b"), b"data: [DONE]\n\n"], gap=0.02) as server:
        channel = channel_to(server.port)
        for _ in range(3):
            events = await channel.post("/chat/completions", b"{}")
            try:
                assert await texts(events) == ["a", "b"]
            finally:
                await events.close()
        assert server.connections == 1  # one connection, used three times
        await channel.close()


async def test_a_stream_closed_early_closes_its_connection() -> None:
    async with Bare([chunk(str(i)) for i in range(50)], gap=0.05) as server:
        channel = channel_to(server.port)
        events = await channel.post("/chat/completions", b"{}")
        stream = aiter(events)
        assert (await anext(stream))["choices"]  # type: ignore[index]
        await events.close()  # what the loop does when a turn is cancelled
        async with asyncio.timeout(GUARD):
            await server.closed.wait()  # the provider sees the connection go
        await channel.close()


async def test_a_busy_reader_is_not_taken_for_a_silent_provider() -> None:
    # the provider sends every 0.1 s (then ends); the reader stops for four idle timeouts
    async with Bare([chunk(str(i)) for i in range(12)], gap=0.1) as server:
        channel = channel_to(server.port, idle=0.5)
        events = await channel.post("/chat/completions", b"{}")
        got = []
        try:
            async for piece in events:
                got.append(piece)
                if len(got) == 1:
                    await asyncio.sleep(2.0)
        finally:
            await events.close()
        assert len(got) == 12
        await channel.close()


async def test_a_silent_provider_fails_the_read_as_idle() -> None:
    async with Bare([chunk("a")], gap=60.0) as server:  # one chunk, then silence
        channel = channel_to(server.port, idle=0.5)
        events = await channel.post("/chat/completions", b"{}")
        with pytest.raises(StreamIdle, match=r"sent nothing for 0\.5 s"):
            async with asyncio.timeout(GUARD):
                await texts(events)
        await events.close()
        await channel.close()


async def test_the_proxy_the_environment_names_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    # the model's host does not resolve; only the proxy (the bare server) can answer
    async with Bare([chunk("via proxy"), b"data: [DONE]\n\n"]) as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        client = openai.AsyncOpenAI(
            api_key="k", base_url="http://model.invalid:9/v1", max_retries=0, timeout=5.0
        )
        channel = channel_for(client, Endpoint("proxied", "k", 5.0))
        events = await channel.post("/chat/completions", b"{}")
        try:
            assert await texts(events) == ["via proxy"]
        finally:
            await events.close()
        await channel.close()


def headers_of(head: bytes) -> dict[str, str]:
    lines = head.decode().split("\r\n")[1:]
    pairs = (line.split(":", 1) for line in lines if ":" in line)
    return {name.strip().lower(): value.strip() for name, value in pairs}


PER_CALL = {"content-length", "host", "x-stainless-retry-count", "x-stainless-read-timeout"}
PER_CALL |= {"x-stainless-timeout", "accept-encoding", "connection", "user-agent"}


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
async def test_the_lean_call_sends_what_the_sdk_sends(sdk: str) -> None:
    import anthropic

    async with Bare([b"event: message_stop\ndata: {}\n\n", b"data: [DONE]\n\n"]) as server:
        url = f"http://127.0.0.1:{server.port}"
        client: openai.AsyncOpenAI | anthropic.AsyncAnthropic
        if sdk == "openai":
            client = openai.AsyncOpenAI(api_key="sk-1", base_url=f"{url}/v1", max_retries=0)
        else:
            client = anthropic.AsyncAnthropic(api_key="sk-2", base_url=url, max_retries=0)
        stream_cls = openai.AsyncStream if sdk == "openai" else anthropic.AsyncStream
        path = "/chat/completions" if sdk == "openai" else "/v1/messages"
        body = {"model": "m", "stream": True}
        sent = await client.post(
            path, body=body, cast_to=object, stream=True, stream_cls=stream_cls[object]
        )
        await sent.close()
        channel = channel_for(client, Endpoint(sdk))
        events = await channel.post(path, json_body(body))
        await events.close()
        by_sdk, by_channel = (headers_of(head) for head in server.heads)
        assert by_sdk["authorization"] == by_channel["authorization"]
        assert by_sdk["user-agent"] == by_channel["user-agent"]  # the SDK's own name
        same = {k: v for k, v in by_sdk.items() if k not in PER_CALL}
        assert same == {k: v for k, v in by_channel.items() if k not in PER_CALL}
        assert server.heads[0].split(b" ")[1] == server.heads[1].split(b" ")[1]  # the path
        await channel.close()


async def test_a_compressed_stream_is_read_as_it_comes() -> None:
    async with Bare([chunk("packed"), chunk(" tight"), b"data: [DONE]\n\n"], gzip=True) as server:
        channel = channel_to(server.port)
        events = await channel.post("/chat/completions", b"{}")
        try:
            assert await texts(events) == ["packed", " tight"]
        finally:
            await events.close()
        await channel.close()


async def test_a_connection_dropped_after_done_ends_the_stream_well() -> None:
    async with Bare([chunk("all"), b"data: [DONE]\n\n"], gap=0.02, drop=True) as server:
        channel = channel_to(server.port)
        events = await channel.post("/chat/completions", b"{}")
        try:
            assert await texts(events) == ["all"]  # no ProviderUnavailable after [DONE]
        finally:
            await events.close()
        await channel.close()


async def test_a_connection_not_made_in_time_is_said_as_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import aiohttp

    from ostinato.errors import ProviderUnavailable

    async def too_slow(*args: object, **kwargs: object) -> None:
        raise aiohttp.ConnectionTimeoutError("Connection timeout to host")  # as aiohttp says

    channel = channel_to(9)
    monkeypatch.setattr(aiohttp.ClientSession, "_request", too_slow)
    with pytest.raises(ProviderUnavailable, match="could not connect in time"):
        await channel.post("/chat/completions", b"{}")  # not "sent nothing" (the idle one)
    await channel.close()
