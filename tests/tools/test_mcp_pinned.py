"""A person's MCP server is reached only at the addresses that were vetted
(``tools.mcp.pinned``): the name is resolved once, by the vetting resolver, and never
again by the HTTP client, so a DNS answer that changes after the check (rebinding) cannot
move the connection; the name stays in the Host header and the TLS server name; no proxy
from the environment is used. Unit tests with a mock transport behind the pin, and the
fixture MCP server over streamable HTTP under a name only the test's resolver knows."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from ostinato.tools.mcp import McpClients, McpServerConfig, McpToolCache, mcp_tools
from ostinato.tools.mcp.pinned import AddressGuard, PinnedTransport
from ostinato.tools.netguard import IPAddress, refusal
from tests.tools.test_mcp import SERVER, _free_port, _wait_listening, call

PUBLIC = ipaddress.ip_address("93.184.216.34")
LOOPBACK = ipaddress.ip_address("127.0.0.1")
NAME = "mcp.pinned.test"  # resolves nowhere but in these tests' resolvers


class Rebinding:
    """A resolver whose answer changes after the first question, as a rebinding DNS
    server's does: each call takes the next answer (the last one repeats)."""

    def __init__(self, *answers: list[IPAddress]) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[IPAddress]:
        self.asked.append(host)
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


class Seen:
    """A mock transport behind the pin: records what it is asked to send."""

    def __init__(self, refuse: set[str] | None = None) -> None:
        self.requests: list[httpx2.Request] = []
        self.refuse = refuse or set()

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.host in self.refuse:
            raise httpx2.ConnectError("no route", request=request)
        self.requests.append(request)
        return httpx2.Response(200, text="ok")

    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self.handler)


async def test_the_request_goes_to_the_vetted_address_with_the_name_in_host_and_sni() -> None:
    resolver = Rebinding([PUBLIC], [LOOPBACK])
    seen = Seen()
    pin = PinnedTransport(f"https://{NAME}/mcp", AddressGuard(refusal, resolver), seen.transport())
    async with httpx2.AsyncClient(transport=pin, trust_env=False) as client:
        first = await client.post(f"https://{NAME}/mcp", json={"a": 1})
        second = await client.get(f"https://{NAME}/mcp")  # after the DNS answer changed
    assert first.status_code == second.status_code == 200
    assert resolver.asked == [NAME]  # resolved once, when vetted; never by the client
    for sent in seen.requests:
        assert sent.url.host == str(PUBLIC) and sent.url.path == "/mcp"
        assert sent.headers["host"] == NAME
        assert sent.extensions["sni_hostname"] == NAME
    assert first.request.url.host == NAME  # the caller still sees the URL it asked for


async def test_a_name_that_resolves_to_a_private_address_is_never_dialled() -> None:
    seen = Seen()
    for answer in ([LOOPBACK], [PUBLIC, ipaddress.ip_address("169.254.169.254")]):
        pin = PinnedTransport(
            f"http://{NAME}/mcp", AddressGuard(refusal, Rebinding(answer)), seen.transport()
        )
        async with httpx2.AsyncClient(transport=pin) as client:
            with pytest.raises(httpx2.ConnectError, match="refused"):
                await client.get(f"http://{NAME}/mcp")
    assert seen.requests == []


async def test_other_hosts_are_refused_and_a_dead_address_falls_to_the_next() -> None:
    other = ipaddress.ip_address("93.184.216.35")
    seen = Seen(refuse={str(PUBLIC)})
    pin = PinnedTransport(
        f"http://{NAME}/mcp", AddressGuard(refusal, Rebinding([PUBLIC, other])), seen.transport()
    )
    async with httpx2.AsyncClient(transport=pin) as client:
        with pytest.raises(httpx2.ConnectError, match=r"go to mcp\.pinned\.test only"):
            await client.get("http://elsewhere.example/mcp")
        assert (await client.get(f"http://{NAME}:8080/mcp")).status_code == 200
    (sent,) = seen.requests
    assert sent.url.host == str(other) and sent.url.port == 8080


@pytest.fixture
def named_server(tmp_path: Path) -> Iterator[int]:
    """The fixture MCP server on loopback, accepting the Host header ``NAME``."""
    port = _free_port()
    env = {**os.environ, "MCP_FIXTURE_HOSTS": f"{NAME}:*"}
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_listening(port, process)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_a_session_dials_what_was_vetted_and_ignores_proxies_from_the_environment(
    named_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = f"http://127.0.0.1:{_free_port()}"  # a proxy that is not there
    for variable in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(variable, dead)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    # Only loopback passes this guard, and NAME resolves only through its resolver: the
    # session works only if it connects to the address vetted, not to the name again.
    resolver = Rebinding([LOOPBACK], [ipaddress.ip_address("10.1.2.3")])
    guard = AddressGuard(lambda a: None if a == LOOPBACK else "not the loopback", resolver)
    config = McpServerConfig(name="pinned", url=f"http://{NAME}:{named_server}/mcp", guard=guard)
    clients = McpClients()
    try:
        tools = {t.name: t for t in await mcp_tools(config, cache=McpToolCache(), clients=clients)}
        assert await call(tools["pinned_add"], {"a": 2, "b": 3}) == {"result": 5}
        host = await call(tools["pinned_header"], {"name": "host"})
        assert host == {"result": f"{NAME}:{named_server}"}  # the server saw its name
    finally:
        await clients.aclose()
    assert resolver.asked == [NAME]


async def test_without_a_guard_the_operator_s_server_is_reached_by_its_name() -> None:
    config = McpServerConfig(name="ops", url="http://localhost:9/mcp")
    assert config.guard is None  # operators' servers: reached as configured
    guarded = McpServerConfig(name="ops", url="http://localhost:9/mcp", guard=AddressGuard())
    assert guarded != config  # a changed guard is a changed configuration: a new session
