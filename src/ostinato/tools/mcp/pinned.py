"""Reaching a person's MCP server only at addresses that were vetted (``PinnedTransport``).

A person's server (``personal_mcp``) is vetted like ``http_fetch``'s URLs: its host is
resolved and every address must be public (``netguard.vet_host``). Checking a name and
then letting the HTTP client resolve it again would leave a window in which the name's
DNS answer changes (rebinding: public when checked, ``127.0.0.1`` when dialled). So the
session's HTTP client goes through this transport, which resolves and vets the host
itself, once, when the session's first request goes out, and from then on dials those
addresses and nothing else: the request it sends carries the address in its URL, and
the name in its ``Host`` header and TLS server name (SNI, and so the certificate check).

It talks to the one host it was made for (any port: the SDK follows a server's redirect
from http to https on the same host); a request for any other host is refused. The
client that uses it reads no proxy settings from the environment (``trust_env=False``):
a proxy would dial the name itself and undo the pinning. Each session has its own
transport, so a session opened again (the server restarted, the configuration changed)
resolves and vets again.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx2

from ostinato.errors import ToolError
from ostinato.tools.netguard import (
    AddressPolicy,
    IPAddress,
    Resolver,
    ip_host,
    refusal,
    system_resolver,
    vet_host,
)


@dataclass(frozen=True, slots=True)
class AddressGuard:
    """What a vetted server may resolve to: ``policy`` (``netguard.refusal``: public
    addresses only; ``None``: any, for a deployment that allows private servers) over
    the addresses ``resolver`` finds."""

    policy: AddressPolicy | None = refusal
    resolver: Resolver = system_resolver


def _port(url: httpx2.URL) -> int:
    return url.port or (443 if url.scheme == "https" else 80)


class PinnedTransport(httpx2.AsyncBaseTransport):
    """Sends every request of one server to the addresses its name had when vetted."""

    def __init__(
        self, url: str, guard: AddressGuard, inner: httpx2.AsyncBaseTransport | None = None
    ) -> None:
        parsed = httpx2.URL(url)
        self.host, self.port = parsed.host, _port(parsed)
        self.guard = guard
        self._inner = inner or httpx2.AsyncHTTPTransport()
        self._addresses: list[IPAddress] | None = None
        self._lock = asyncio.Lock()

    async def addresses(self, request: httpx2.Request) -> list[IPAddress]:
        """The vetted addresses, resolved on the first request and kept."""
        async with self._lock:
            if self._addresses is None:
                try:
                    self._addresses = await vet_host(
                        self.host,
                        self.port,
                        resolver=self.guard.resolver,
                        policy=self.guard.policy,
                    )
                except ToolError as exc:  # refused, or the name does not resolve
                    raise httpx2.ConnectError(exc.message, request=request) from None
            return self._addresses

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        if url.host != self.host:
            raise httpx2.ConnectError(
                f"refused: this MCP server's connections go to {self.host} only, not to {url.host}",
                request=request,
            )
        addresses = await self.addresses(request)
        extensions = dict(request.extensions)
        if url.scheme == "https" and ip_host(self.host) is None:
            extensions["sni_hostname"] = self.host
        for i, address in enumerate(addresses):
            # Each vetted address in turn while connecting fails (an IPv6 answer on a
            # host without IPv6); the request's headers, Host among them, stay as made.
            pinned = httpx2.Request(
                request.method,
                url.copy_with(host=str(address)),
                headers=request.headers,
                stream=request.stream,
                extensions=extensions,
            )
            try:
                return await self._inner.handle_async_request(pinned)
            except (httpx2.ConnectError, httpx2.ConnectTimeout):
                if i + 1 == len(addresses):
                    raise
        raise AssertionError("vet_host returns at least one address")

    async def aclose(self) -> None:
        await self._inner.aclose()
