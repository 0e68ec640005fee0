"""A schema from a caller, a model or a remote MCP server never resolves anything
outside itself (issue 25, item 1): before, ``POST /v1/tools/forged`` validated the
example with jsonschema's default resolver, which fetched a remote ``$ref`` from the
server process and echoed what it read in the 422; a self-referencing schema was a 500."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest

from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.base import Store
from ostinato.store.forged import SaveForgedTool
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.forge import Sandbox
from ostinato.tools.forge.tools import forged_source
from ostinato.tools.mcp import McpClients, McpServerConfig, wrap_tool
from ostinato.tools.mounting import Mount, Source
from ostinato.tools.schema import ToolSourceError
from tests.bounded.internal import SECRET, Secret, internal_service


@pytest.fixture
def internal() -> Iterator[str]:
    with internal_service() as url:
        yield url


@pytest.fixture
async def client(store: Store, model: ScriptedModel) -> AsyncIterator[httpx.AsyncClient]:
    sandbox = Sandbox()
    runtime = Runtime(
        store,
        model=model,
        mount=Mount(
            [Source("builtins", builtin_tools(), builtin=True), forged_source(store, sandbox)]
        ),
        sandbox=sandbox,
    )
    app = create_app(runtime, ping_interval=0.2)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        yield c
    await runtime.close()


def _forge(parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "probe",
        "description": "A probe.",
        "parameters": parameters,
        "code": "(args) => 1",
        "example": {"x": "x"},
    }


def _pointing(reference: str, keyword: str = "$ref") -> dict[str, Any]:
    return {"type": "object", "properties": {"x": {keyword: reference}}}


@pytest.mark.parametrize("keyword", ["$ref", "$dynamicRef"])
async def test_forging_reads_nothing_remote(
    client: httpx.AsyncClient, internal: str, keyword: str
) -> None:
    answer = await client.post(
        "/v1/tools/forged", json=_forge(_pointing(f"{internal}/secret.json", keyword))
    )
    assert answer.status_code == 422, answer.text
    assert "points outside the schema" in answer.json()["error"]["message"]
    assert SECRET not in answer.text and Secret.hits == []
    assert (await client.get("/v1/tools/forged")).json() == {"tools": []}


async def test_forging_reads_nothing_from_disk(client: httpx.AsyncClient, tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(f'{{"enum": ["{SECRET}"]}}')
    answer = await client.post("/v1/tools/forged", json=_forge(_pointing(secret.as_uri())))
    assert answer.status_code == 422 and SECRET not in answer.text


async def test_a_self_referencing_schema_is_a_422(client: httpx.AsyncClient) -> None:
    answer = await client.post("/v1/tools/forged", json=_forge({"type": "object", "$ref": "#"}))
    assert answer.status_code == 422, answer.text
    assert "refers to itself without end" in answer.json()["error"]["message"]


async def test_a_stored_tool_with_a_remote_reference_reads_nothing_when_called(
    client: httpx.AsyncClient, model: ScriptedModel, store: Store, internal: str
) -> None:
    """A version stored before the check existed: calling it is a refusal the model sees."""
    schema = _pointing(f"{internal}/secret.json")
    await store.write(SaveForgedTool("local", "probe", "A probe.", schema, "(a) => 1", None))
    cid = (await client.post("/v1/conversations")).json()["id"]
    model.add(tool_step(("my_probe", {"x": "x"})), text_step("It was refused."))
    answer = await client.post(f"/v1/conversations/{cid}/turns", json={"text": "probe"})
    assert answer.status_code == 200, answer.text
    (call,) = await store.list_tool_calls(cid)
    assert call.is_error and "points outside the schema" in (call.result or "")
    assert SECRET not in (call.result or "") and Secret.hits == []


async def test_an_mcp_tool_whose_schema_points_outside_is_left_out(internal: str) -> None:
    config = McpServerConfig(name="remote", url="http://127.0.0.1:9/mcp")
    spec = types.Tool(name="probe", input_schema=_pointing(f"{internal}/secret.json"))
    clients = McpClients()
    with pytest.raises(ToolSourceError, match="points outside the schema"):
        wrap_tool(spec, config, clients)
    await clients.aclose()
    assert Secret.hits == []
