"""A lean streamed call for the providers' hot path: aiohttp directly, SSE parsed here.

The SDKs' generic ``post`` builds an ``httpx2`` request, runs it through its transport
(aiohttp, for the deployment's clients), wraps the answer in an ``httpx2`` response and
decodes its server-sent events line by line in Python; with aiohttp's read timeout
armed, every chunk also moves a timer. Together that was about a quarter of the
server's CPU with 1,000 streams open (issue 32, docs/performance.md). A ``Channel``
sends the same request (the SDK client's own headers, base URL and timeouts) straight on
an aiohttp session of its own and reads the body as it comes (the SDKs' own aiohttp
transport, ``httpx-aiohttp``, showed the way to aiohttp; this code is ostinato's):

- the events are cut out of the bytes by ``EventParser`` (the WHATWG HTML standard's
  event stream format: ``data`` lines joined, ``event`` kept, comments and other fields
  skipped, ``\\r\\n``, ``\\n`` and ``\\r`` all ending a line);
- the idle timeout is one timer per stream that a chunk never touches: a chunk only notes
  the loop's time, and the timer, when it comes due, moves itself on to the last chunk's
  time plus the timeout, or fails the read if nothing came (``_Watch``; the ping timer of
  ``server.streams`` works the same way). The response's head must come within the idle
  timeout of the call's start, its connection within the connect timeout;
- what goes wrong is the SDK's own typed error: an HTTP error status is read whole and
  made into the SDK's exception by the SDK client itself, an error event by the SDK's
  own rule (``models.channels``), and the adapter classifies both as before; a
  connection that fails, drops or stays silent is a ``ProviderUnavailable`` or
  ``StreamIdle`` (``failures.link_failure``, ``idle_failure``).

A response read to its end goes back to the session's pool for the next call; one left
early (the caller closed the stream, or was cancelled) is closed, so the provider stops
generating. ``[DONE]`` ends the events; the rest of the body is read and dropped, so the
connection is read to its end and used again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from ostinato.errors import ModelError
from ostinato.models.failures import Endpoint, idle_failure, link_failure

KEEPALIVE = 5.0  # seconds an unused pooled connection is kept (httpx's default too)
_DONE = b"[DONE]"

# what makes the SDK's exception for an HTTP error status (status, headers, body, URL)
StatusError = Callable[[int, Mapping[str, str], bytes, str], Exception]
# one event as the SDK would pass it on (name, data, URL): its JSON, ``SKIP``, or the
# SDK's exception for an error event raised
EventRule = Callable[[bytes | None, bytes, str], Any]
SKIP = object()


class _Idle(Exception):
    """The idle timer's verdict, set on the response's reader; never leaves this module."""


class EventParser:
    """Server-sent events from bytes as they arrive: ``feed`` returns the events that a
    chunk completes, as ``(event name or None, data)``; an event without data lines is
    not one (as the standard says)."""

    __slots__ = ("_rest",)

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, chunk: bytes) -> list[tuple[bytes | None, bytes]]:
        buffer = self._rest + chunk if self._rest else chunk
        if b"\r" in buffer:
            held = buffer.endswith(b"\r")  # its "\n" may be in the next chunk
            buffer = buffer[:-1] if held else buffer
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if held:
                buffer += b"\r"
        *blocks, self._rest = buffer.split(b"\n\n")
        return [event for block in blocks if (event := _event(block)) is not None]


def _event(block: bytes) -> tuple[bytes | None, bytes] | None:
    if block.startswith(b"data:") and b"\n" not in block:  # the usual one-line event
        value = block[5:]
        return None, value[1:] if value.startswith(b" ") else value
    name: bytes | None = None
    data: list[bytes] = []
    for line in block.split(b"\n"):
        field, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            data.append(value)
        elif field == b"event":
            name = value
    return (name, b"\n".join(data)) if data else None


class Channel:
    """Streamed POSTs to one provider endpoint: the SDK client's base URL and headers, an
    aiohttp session made in the event loop of the first call, the connect and idle
    timeouts. ``status_error`` makes the SDK's exception for an HTTP error, ``event``
    reads one event as the SDK would (``models.channels`` has both for each SDK)."""

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        endpoint: Endpoint,
        *,
        connect: float,
        status_error: StatusError,
        event: EventRule,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = dict(headers)
        self.endpoint = endpoint
        self.idle = endpoint.idle_timeout or 0.0
        self.connect = connect
        self._status_error = status_error
        self._event = event
        self._session: aiohttp.ClientSession | None = None
        # the proxy the environment names for this server, found once (as httpx does when
        # its client is made), not on every call as aiohttp's ``trust_env`` would
        try:
            self._proxy: URL | None
            self._proxy, self._proxy_auth = get_env_proxy_for_url(URL(self.base_url))
        except LookupError:
            self._proxy, self._proxy_auth = None, None

    def __repr__(self) -> str:
        return f"Channel({self.endpoint.label!r})"

    def _session_now(self) -> aiohttp.ClientSession:
        session = self._session
        if session is None or session.closed:
            import httpx2  # the SDKs' own TLS settings (certifi, SSL_CERT_FILE), as they connect

            tls = httpx2.create_ssl_context(trust_env=True)
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=KEEPALIVE, ssl=tls)
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.connect or None)
            # a compressed answer (gzip, deflate: what aiohttp asks for) is decompressed
            # as it comes, as the SDKs' client does
            session = aiohttp.ClientSession(connector=connector, timeout=timeout)
            self._session = session
        return session

    async def post(self, path: str, body: bytes) -> Events:
        """The streamed answer to ``body`` posted at ``path``; an HTTP error status raises
        the SDK's exception for it, a failed connection a ``ModelError``."""
        url = self.base_url + path
        try:
            async with asyncio.timeout(self.idle or None):
                response = await self._session_now().post(
                    url,
                    data=body,
                    headers=self.headers,
                    proxy=self._proxy,
                    proxy_auth=self._proxy_auth,
                )
                if response.status >= 400:
                    raise await self._failed(response, url)
        except aiohttp.ClientError as exc:  # a connect timeout too (a TimeoutError as well)
            raise _link_failure(self.endpoint, exc) from exc
        except TimeoutError as exc:
            raise idle_failure(self.endpoint) from exc
        return Events(self, response, url)

    async def _failed(self, response: aiohttp.ClientResponse, url: str) -> Exception:
        try:
            raw = await response.read()
        finally:
            response.release()
        return self._status_error(response.status, dict(response.headers), raw, url)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


class Events:
    """One streamed answer's events as JSON (``[DONE]`` ends them), with ``close``."""

    __slots__ = ("_channel", "_response", "_url")

    def __init__(self, channel: Channel, response: aiohttp.ClientResponse, url: str) -> None:
        self._channel = channel
        self._response = response
        self._url = url

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._events()

    async def _events(self) -> AsyncIterator[Any]:
        channel, event, url = self._channel, self._channel._event, self._url
        reader = self._response.content
        parser = EventParser()
        watch = _Watch(reader, channel.idle)
        try:
            while chunk := await reader.readany():
                watch.last, watch.taken = watch.now(), reader.total_bytes
                for name, data in parser.feed(chunk):
                    if data.startswith(_DONE):
                        await self._drain()
                        return
                    payload = event(name, data, url)  # ValueError: the caller's "malformed"
                    if payload is not SKIP:
                        yield payload
        except _Idle as exc:
            raise idle_failure(channel.endpoint) from exc
        except aiohttp.ClientError as exc:
            raise _link_failure(channel.endpoint, exc) from exc
        finally:
            watch.cancel()

    async def _drain(self) -> None:
        """What follows ``[DONE]``, read so the connection can be used again; a server
        that drops the connection there has sent everything (it is closed, not failed)."""
        try:
            while await self._response.content.readany():
                pass
        except (aiohttp.ClientError, _Idle):
            self._response.close()

    async def close(self) -> None:
        """Close the answer: a connection read to its end went back to the pool when it
        ended (aiohttp's own doing), one left early is closed (the provider stops)."""
        self._response.close()


class _Watch:
    """The idle timeout of one response: a timer that a chunk never touches (the reader
    notes ``last``, when it took a chunk, and ``taken``, the bytes received by then).
    When due, the timer moves on to ``last`` plus the timeout; when the reader holds
    bytes it has not taken yet, or the body's end (the provider spoke, the reader is
    busy), to now plus the timeout; else it fails the reader's wait."""

    __slots__ = ("_idle", "_reader", "_timer", "last", "now", "taken")

    def __init__(self, reader: aiohttp.StreamReader, idle: float) -> None:
        loop = asyncio.get_running_loop()
        self.now = loop.time
        self.last = loop.time()
        self.taken = reader.total_bytes
        self._reader = reader
        self._idle = idle
        self._timer = loop.call_at(self.last + idle, self._due) if idle > 0 else None

    def _due(self) -> None:
        now, reader = self.now(), self._reader
        due = self.last + self._idle
        if reader.total_bytes != self.taken or reader.is_eof():
            due = max(due, now + self._idle)
        if now < due:
            self._timer = asyncio.get_running_loop().call_at(due, self._due)
        else:
            self._timer = None
            reader.set_exception(_Idle())

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _link_failure(endpoint: Endpoint, exc: aiohttp.ClientError) -> ModelError:
    """A connection that could not be made in time, could not be made, or dropped."""
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return link_failure(endpoint, None)
    return link_failure(endpoint, str(exc) or type(exc).__name__)
