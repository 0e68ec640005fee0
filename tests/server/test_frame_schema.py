"""The frames' JSON Schema: shipped in the package (and fresh), in the OpenAPI document
(the SSE responses refer to it), and true of the frames a real turn sends."""

from __future__ import annotations

import json
from typing import Any

import httpx
from jsonschema import Draft202012Validator

from ostinato.frames import FRAME_TYPES
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.server.frame_schema import SCHEMA_FILE, document, render
from tests.server.sse_client import parse_stream

SSE = {"accept": "text/event-stream"}


def test_the_shipped_file_is_fresh() -> None:
    # regenerate with: python -m ostinato.server.frame_schema
    assert SCHEMA_FILE.read_text(encoding="utf-8") == render()


def test_every_frame_type_is_in_the_union() -> None:
    schema = document()
    Draft202012Validator.check_schema(schema)
    mapping = schema["discriminator"]["mapping"]
    assert set(mapping) == set(FRAME_TYPES)
    assert len(schema["oneOf"]) == len(FRAME_TYPES)


async def test_the_openapi_document_refers_to_it(client: httpx.AsyncClient) -> None:
    openapi = (await client.get("/openapi.json")).json()
    schemas = openapi["components"]["schemas"]
    assert set(schemas["Frame"]["discriminator"]["mapping"]) == set(FRAME_TYPES)
    frame_ref = {"$ref": "#/components/schemas/Frame"}
    for path, method in (
        ("/v1/conversations/{conversation_id}/turns", "post"),
        ("/v1/conversations/{conversation_id}/events", "get"),
    ):
        sse = openapi["paths"][path][method]["responses"]["200"]["content"]["text/event-stream"]
        assert sse["itemSchema"]["properties"]["data"]["contentSchema"] == frame_ref
    websocket = openapi["paths"]["/v1/conversations/{conversation_id}/ws"]["x-websocket"]
    assert websocket["server-messages"] == frame_ref
    turns = openapi["paths"]["/v1/conversations/{conversation_id}/turns"]["post"]
    body_ref = turns["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert body_ref.rsplit("/", 1)[1] in schemas  # TurnRequest is in the document


async def test_the_frames_of_a_turn_are_valid(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(tool_step(("calculator", {"expression": "2*3"})), text_step("six", chunks=2))
    response = await client.post(
        f"/v1/conversations/{conversation_id}/turns", json={"text": "2*3?"}, headers=SSE
    )
    events = parse_stream(response.text)
    validator = Draft202012Validator(document())
    seen: set[str] = set()
    for event in events:
        if event.event is None:
            continue
        frame: Any = event.data
        errors = [e.message for e in validator.iter_errors(frame)]
        assert not errors, (json.dumps(frame), errors)
        seen.add(frame["type"])
    assert {"turn.started", "message", "text.delta", "tool.started", "turn.finished"} <= seen
