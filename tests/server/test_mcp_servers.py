"""Per-person MCP servers through the server, against a real MCP server over streamable
HTTP (tests/tools/fixtures/mcp_server.py in a subprocess on 127.0.0.1; loopback is
allowed here by the deployment setting the test sets, refused otherwise), with a
scripted model and two API-key callers: ann connects a server with a bearer token, her
next turn is offered its tools and a call reaches the server with her token; bob sees
neither the server nor its tools and cannot remove it."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import httpx
import pytest
from cryptography.fernet import Fernet
from fastapi import FastAPI

from ostinato.approvals import ApprovalPolicy
from ostinato.identity.keys import create_key
from ostinato.identity.settings import AuthSettings
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.base import Store
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.mounting import Mount, Source
from ostinato.tools.personal_mcp import CredentialBox, PersonalMcp
from tests.server.people import SSE, eventually, turn_ended
from tests.server.sse_client import open_stream
from tests.tools.test_mcp import SERVER, _free_port, _wait_listening


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_listening(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


@dataclass
class People:
    app: FastAPI
    runtime: Runtime
    personal: PersonalMcp
    keys: dict[str, str]
    owners: dict[str, str]
    ann: httpx.AsyncClient
    bob: httpx.AsyncClient


@pytest.fixture
async def people(store: Store, model: ScriptedModel) -> AsyncIterator[People]:
    box = CredentialBox(Fernet.generate_key().decode())
    personal = PersonalMcp(store, None, box, allow_private=True)  # the test's loopback server
    builtins = Source("builtins", builtin_tools(), builtin=True)
    runtime = Runtime(
        store,
        model=model,
        mount=Mount([builtins, personal.source()]),
        approvals=ApprovalPolicy(ask_for=frozenset()),
    )
    runtime.personal_mcp = personal
    app = create_app(runtime, ping_interval=0.2, auth=AuthSettings(mode="keys", key_cache_s=0))
    # Owners of their own: one PostgreSQL database serves every test, and other tests'
    # ann and bob have servers there too.
    owners = {who: f"{who}-{uuid.uuid4().hex[:8]}" for who in ("ann", "bob")}
    keys = {who: (await create_key(store, owners[who], "test"))[1] for who in owners}
    transport = httpx.ASGITransport(app=app)
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(
                    transport=transport,
                    base_url="http://test",
                    headers={"authorization": f"Bearer {keys[who]}"},
                )
            )
            for who in ("ann", "bob")
        ]
        yield People(app, runtime, personal, keys, owners, *clients)
    await app.state.ostinato.aclose()
    await personal.aclose()
    await runtime.close()


async def run_turn(people: People, who: str, cid: str, text: str) -> None:
    headers = {**SSE, "authorization": f"Bearer {people.keys[who]}"}
    body = json.dumps({"text": text}).encode()
    path = f"/v1/conversations/{cid}/turns"
    async with open_stream(people.app, "POST", path, headers=headers, body=body) as stream:
        await stream.frames_until("turn.finished", within=30)


async def test_a_person_s_server_serves_them_and_no_one_else(
    people: People, model: ScriptedModel, store: Store, mcp_url: str
) -> None:
    body = {"name": "fix", "url": mcp_url, "bearer": "s3cret", "headers": {"X-Team": "blue"}}
    added = await people.ann.post("/v1/mcp-servers", json=body)
    assert added.status_code == 201, added.text
    assert added.json()["header_names"] == ["Authorization", "X-Team"]
    assert "s3cret" not in added.text and added.json()["tool_prefix"] == "mcp_fix_"
    (record,) = await store.mcp_servers(people.owners["ann"])
    assert record.secret is not None and "s3cret" not in record.secret  # encrypted at rest
    assert (await people.ann.post("/v1/mcp-servers", json=body)).status_code == 409
    assert (await people.bob.get("/v1/mcp-servers")).json() == {"servers": []}

    cid = (await people.ann.post("/v1/conversations")).json()["id"]
    model.add(tool_step(("mcp_fix_header", {"name": "authorization"})), text_step("ok"))
    await run_turn(people, "ann", cid, "which token do you send?")
    offered = [t.name for t in model.requests[-2].tools]
    assert "mcp_fix_add" in offered and "clock" in offered
    assert offered.index("clock") < offered.index("mcp_fix_add")  # after the built-ins
    (used,) = [c for c in await store.list_tool_calls(cid) if c.name == "mcp_fix_header"]
    assert used.status == "ok" and "Bearer s3cret" in (used.result or ""), used.result

    other = (await people.bob.post("/v1/conversations")).json()["id"]
    model.add(tool_step(("mcp_fix_add", {"a": 1, "b": 2})), text_step("no"))
    await run_turn(people, "bob", other, "add 1 and 2")
    assert not [t.name for t in model.requests[-2].tools if t.name.startswith("mcp_")]
    (refused,) = await store.list_tool_calls(other)
    assert refused.is_error and "there is no tool named" in (refused.result or "")
    await eventually(lambda: turn_ended(store, other))

    assert (await people.bob.delete("/v1/mcp-servers/fix")).status_code == 404
    assert (await people.ann.delete("/v1/mcp-servers/fix")).status_code == 204
    assert (await people.ann.get("/v1/mcp-servers")).json() == {"servers": []}
    model.add(text_step("gone"))
    await run_turn(people, "ann", cid, "and now?")
    assert not [t.name for t in model.requests[-1].tools if t.name.startswith("mcp_")]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/mcp",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/mcp",
        "http://0x7f000001/mcp",
        "ftp://example.com/mcp",
    ],
)
async def test_private_addresses_are_refused_unless_the_deployment_allows_them(
    people: People, url: str
) -> None:
    people.personal.allow_private = False
    response = await people.ann.post("/v1/mcp-servers", json={"name": "x", "url": url})
    assert response.status_code == 422, response.text
    assert (await people.ann.get("/v1/mcp-servers")).json() == {"servers": []}


async def test_without_a_key_credentials_are_refused_and_bad_input_is_a_422(
    people: People, mcp_url: str
) -> None:
    people.personal.box = CredentialBox(None)
    name = f"plain_{uuid.uuid4().hex[:8]}"  # one PostgreSQL database serves every test
    with_token = {"name": name, "url": mcp_url, "bearer": "t"}
    response = await people.ann.post("/v1/mcp-servers", json=with_token)
    assert response.status_code == 422 and "mcp_secret_key" in response.text
    plain = await people.ann.post("/v1/mcp-servers", json={"name": name, "url": mcp_url})
    assert plain.status_code == 201, plain.text
    assert (await people.ann.delete(f"/v1/mcp-servers/{name}")).status_code == 204
    for bad in ({"name": "Bad Name", "url": mcp_url}, {"name": "y", "url": mcp_url, "x": 1}):
        assert (await people.ann.post("/v1/mcp-servers", json=bad)).status_code == 422
    with pytest.raises(ValueError, match="Fernet key"):
        CredentialBox("not a key")


async def test_a_server_is_vetted_again_before_a_new_listing_and_the_switch_is_a_403(
    people: People, model: ScriptedModel, mcp_url: str
) -> None:
    name = f"again_{uuid.uuid4().hex[:8]}"
    added = await people.ann.post("/v1/mcp-servers", json={"name": name, "url": mcp_url})
    assert added.status_code == 201, added.text
    people.personal.allow_private = False  # the deployment changed its mind
    people.personal.cache.invalidate()
    cid = (await people.ann.post("/v1/conversations")).json()["id"]
    model.add(text_step("hi"))
    await run_turn(people, "ann", cid, "hello")  # the turn runs; the server is left out
    assert not [t.name for t in model.requests[-1].tools if t.name.startswith("mcp_")]
    assert "clock" in [t.name for t in model.requests[-1].tools]

    people.runtime.personal_mcp = None  # tools.personal_mcp = false
    off = await people.ann.get("/v1/mcp-servers")
    assert off.status_code == 403 and "does not take" in off.text
    await people.personal.remove(people.owners["ann"], name)


async def test_a_key_that_is_not_a_fernet_key_is_a_configuration_error(store: Store) -> None:
    from ostinato.config import Config, ConfigError
    from ostinato.deployment import personal_mcp

    config = Config.model_validate({"tools": {"mcp_secret_key": "nope"}})
    with pytest.raises(ConfigError, match="mcp_secret_key"):
        personal_mcp(config, store, None)
    config = Config.model_validate({"tools": {"personal_mcp": False}})
    assert personal_mcp(config, store, None) == (None, None)
