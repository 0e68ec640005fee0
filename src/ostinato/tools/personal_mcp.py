"""MCP servers a person connects for their own agent (``/v1/mcp-servers``).

Only streamable HTTP (a stdio server is a program on the server's machine: that stays in
the operator's configuration). Each server is stored per owner (``store.mcp_servers``)
with its credentials (HTTP headers; a bearer token becomes ``Authorization``) encrypted
by ``CredentialBox`` (Fernet, with the deployment's ``tools.mcp_secret_key``), so the
database alone does not give them away.

Its URL is vetted like ``http_fetch``'s (``netguard``: the host resolved, every address
public) when it is added, and every session with it connects only to addresses that
passed the same check, resolved when the session opens (``mcp.pinned``: the name is not
resolved again by the HTTP client, so a DNS answer that changes after the check cannot
move the connection; no proxy from the environment is used), unless the deployment
allows private addresses (``tools.mcp_allow_private``). Its tools are listed when a turn of
its owner begins (cached ten minutes per owner and server, as the operator's servers
are) and mounted as ``mcp_<name>_<tool>`` after the built-ins, which they can never
shadow (``Mount``). Another person never lists, mounts or removes them. A server that
cannot be reached or listed is left out of that turn (logged), not the others.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from cryptography.fernet import Fernet, InvalidToken

from ostinato.errors import InvalidRequest
from ostinato.store.base import Store, utcnow
from ostinato.store.mcp_servers import (
    McpServerRecord,
    RemoveMcpServer,
    SaveMcpServer,
    check_server_name,
)
from ostinato.tools.base import Risk, Tool
from ostinato.tools.mounting import Source
from ostinato.tools.netguard import Resolver, refusal, system_resolver, vet_host

if TYPE_CHECKING:
    from ostinato.tools.mcp import McpClients

log = logging.getLogger(__name__)

RISKS: tuple[Risk, ...] = ("safe", "write", "exec", "network")


class CredentialBox:
    """Seals and opens a server's headers with the deployment's Fernet key (None: no
    key, and a server with credentials is refused)."""

    def __init__(self, key: str | None) -> None:
        try:
            self._fernet = Fernet(key.encode()) if key else None
        except (ValueError, TypeError):
            raise ValueError(
                "tools.mcp_secret_key is not a Fernet key (32 url-safe base64-encoded bytes)"
            ) from None

    def seal(self, headers: dict[str, str]) -> str | None:
        if not headers:
            return None
        if self._fernet is None:
            raise InvalidRequest(
                "this deployment keeps no MCP credentials (tools.mcp_secret_key is unset)"
            )
        return self._fernet.encrypt(json.dumps(headers).encode()).decode()

    def open(self, secret: str | None) -> dict[str, str]:
        if secret is None:
            return {}
        if self._fernet is None:
            raise ValueError("tools.mcp_secret_key is unset: stored credentials cannot be read")
        try:
            headers: dict[str, str] = json.loads(self._fernet.decrypt(secret.encode()))
        except InvalidToken:
            raise ValueError("the stored credentials do not open with this key") from None
        return headers


async def vet_url(url: str, *, allow_private: bool, resolver: Resolver = system_resolver) -> None:
    """``InvalidRequest`` unless ``url`` is http(s) with a host whose every address is
    public (any address when ``allow_private``), and no user or password in it."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidRequest("an MCP server's url is http(s)://host/...")
    if "@" in parts.netloc:  # it would be stored, listed and logged as it is
        raise InvalidRequest(
            "an MCP server's url may not carry a user or password (user:pw@host): "
            "send them as headers (bearer, or headers), which are stored encrypted"
        )
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        await vet_host(
            parts.hostname, port, resolver=resolver, policy=None if allow_private else refusal
        )
    except ValueError as exc:  # a port out of range
        raise InvalidRequest(f"{url!r}: {exc}") from None
    except Exception as exc:  # AddressRefused, a name that does not resolve
        raise InvalidRequest(f"{url!r}: {exc}") from None


@dataclass(frozen=True, slots=True)
class NewServer:
    name: str
    url: str
    headers: dict[str, str]
    risk: Risk | None = None


class PersonalMcp:
    """People's MCP servers: adding, listing, removing, and the source that mounts them."""

    def __init__(
        self,
        store: Store,
        clients: McpClients | None,
        box: CredentialBox,
        *,
        allow_private: bool = False,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.store = store
        self.box = box
        self.allow_private = allow_private
        self.resolver = resolver
        # The MCP SDK is imported when a person's server is first listed, not before:
        # a deployment where no one connects one never loads it.
        self._clients = clients
        self._own_clients = False
        self._cache: Any = None

    @property
    def clients(self) -> McpClients:
        if self._clients is None:
            from ostinato.tools.mcp import McpClients

            self._clients, self._own_clients = McpClients(), True
        return self._clients

    @property
    def cache(self) -> Any:
        """The listings (``McpToolCache``), ten minutes per (owner, server)."""
        if self._cache is None:
            from ostinato.tools.mcp import McpToolCache

            self._cache = McpToolCache()
        return self._cache

    async def aclose(self) -> None:
        """Close the sessions it opened itself (shared ones are the deployment's)."""
        if self._own_clients and self._clients is not None:
            await self._clients.aclose()

    async def add(self, owner: str, new: NewServer) -> McpServerRecord:
        name = check_server_name(new.name)
        if new.risk is not None and new.risk not in RISKS:
            raise InvalidRequest(f"risk is one of {', '.join(RISKS)}")
        await vet_url(new.url, allow_private=self.allow_private, resolver=self.resolver)
        record = McpServerRecord(
            owner, name, new.url, self.box.seal(new.headers), new.risk, utcnow()
        )
        (saved,) = await self.store.write(SaveMcpServer(record))
        self.cache.invalidate((owner, _config_name(name)))
        stored: McpServerRecord = saved
        return stored

    async def remove(self, owner: str, name: str) -> None:
        await self.store.write(RemoveMcpServer(owner, name))
        self.cache.invalidate((owner, _config_name(name)))
        if self._clients is not None:
            await self._clients.forget(owner, _config_name(name))

    async def servers(self, owner: str) -> list[McpServerRecord]:
        return await self.store.mcp_servers(owner)

    def source(self) -> Source:
        return Source("mcp:personal", lister=self._tools)

    async def _tools(self, owner: str | None) -> list[Tool]:
        if not owner:
            return []
        tools: list[Tool] = []
        for record in await self.store.mcp_servers(owner):
            try:
                tools += await self._listed(owner, record)
            except Exception as exc:  # one person's server down: the rest still mount
                log.warning("MCP server %s of %s left out: %s", record.name, owner, exc)
        return tools

    async def _listed(self, owner: str, record: McpServerRecord) -> list[Tool]:
        from ostinato.tools.mcp import AddressGuard, McpServerConfig, mcp_tools

        config = McpServerConfig(
            name=_config_name(record.name),
            url=record.url,
            headers=self.box.open(record.secret) or None,
            risk=record.risk if record.risk in RISKS else None,
            # each session's connections vetted, and pinned to what passed
            guard=AddressGuard(None if self.allow_private else refusal, self.resolver),
        )
        return await mcp_tools(config, cache=self.cache, clients=self.clients, owner=owner)


def _config_name(name: str) -> str:
    return f"mcp_{name}"
