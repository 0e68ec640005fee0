"""``[tools.sandbox]`` sets the limits the sandbox enforces: each one changed in the
settings changes what a run may do (real engine, real workers); and a forged tool's
``fetch`` obeys the deployment's ``tools.fetch_allow_hosts``."""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
from pathlib import Path

import pytest

from ostinato.config import ConfigError, load_config
from ostinato.deployment import sandbox_of
from ostinato.store.base import utcnow
from ostinato.store.forged import ForgedTool
from ostinato.tools.base import ToolContext
from ostinato.tools.fetch import Fetcher
from ostinato.tools.forge import SandboxError
from ostinato.tools.forge.forging import as_tool
from ostinato.tools.netguard import IPAddress


@pytest.mark.asyncio
async def test_the_settings_are_the_limits_the_engine_enforces(tmp_path: Path) -> None:
    path = tmp_path / "ostinato.toml"
    path.write_text(
        "[tools.sandbox]\ncpu_s = 0.3\noutput_bytes = 2048\nworkers = 1\n"
        "fetch_max_bytes = 4096\nfetch_timeout_s = 3\n",
        encoding="utf-8",
    )
    config, _ = load_config(path, env={"OSTINATO_TOOLS__SANDBOX__FETCHES": "1"})
    box = sandbox_of(config)
    try:
        assert box.limits.cpu_s == 0.3 and box.limits.output_bytes == 2048
        assert box.limits.fetches == 1
        assert box.fetcher is not None
        assert box.fetcher.policy.max_bytes == 4096 and box.fetcher.policy.timeout == 3.0
        assert await box.run("() => 'y'.repeat(1500)", {}) == "y" * 1500
        with pytest.raises(SandboxError) as caught:
            await box.run("() => 'y'.repeat(3000)", {})  # fine under the default, not here
        assert caught.value.limit == "output"
        with pytest.raises(SandboxError) as caught:
            await box.run("() => { while (true) {} }", {})
        assert caught.value.limit == "cpu"
        many = (
            "async () => (await Promise.allSettled([fetch('http://127.0.0.1/'),"
            " fetch('http://127.0.0.1/')])).map((r) => r.reason.message)"
        )
        reasons = await box.run(many, {}, network=True)
        assert sum("at most 1 requests a run" in r for r in reasons) == 1
    finally:
        await box.aclose()


def test_a_limit_out_of_range_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "ostinato.toml"
    path.write_text("[tools.sandbox]\nmemory_bytes = 10\ncpu_s = -1\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert "tools.sandbox.memory_bytes" in str(caught.value)
    assert "tools.sandbox.cpu_s" in str(caught.value)


async def _weather(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nsunny")
    await writer.drain()
    writer.close()


@pytest.mark.asyncio
async def test_a_forged_tool_s_fetch_obeys_the_deployment_s_allow_list(tmp_path: Path) -> None:
    path = tmp_path / "ostinato.toml"
    path.write_text('[tools]\nfetch_allow_hosts = ["weather.test"]\n', encoding="utf-8")
    config, _ = load_config(path, env={})
    box = sandbox_of(config)
    assert box.fetcher is not None
    server = await asyncio.start_server(_weather, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]

    async def loopback(host: str, port: int) -> list[IPAddress]:
        return [ipaddress.ip_address("127.0.0.1")]

    # Every name is the test's server on 127.0.0.1 (which production refuses: the address
    # checks and the port list off for it); the allow-list is the deployment's, untouched.
    policy = dataclasses.replace(
        box.fetcher.policy, resolver=loopback, address_policy=None, ports=None
    )
    assert policy.allow_hosts == ("weather.test",)
    box.fetcher = Fetcher(policy)
    code = (
        "async (a) => { try { return (await fetch(a.url)).text }"
        " catch (e) { return 'refused: ' + e.message } }"
    )
    schema = {"type": "object", "properties": {"url": {"type": "string"}}}
    tool = as_tool(ForgedTool("ann", "get", 1, "Get a page.", schema, code, utcnow()), box)
    context = ToolContext("c", "t", "r", "u", owner="ann")
    try:
        allowed = await tool.run({"url": f"http://weather.test:{port}/today"}, context)
        assert allowed == "sunny"
        for other in (f"http://elsewhere.test:{port}/", f"http://sub.weather.test:{port}/"):
            refused = await tool.run({"url": other}, context)
            assert "not on this deployment's fetch allow-list" in refused, refused
    finally:
        await box.aclose()
        server.close()
        await server.wait_closed()
