"""Request bodies as bytes (``models.bodies``): the JSON the SDKs would send, each tool's
part encoded once and spliced in while its definition stays the same."""

from __future__ import annotations

import json

from ostinato.messages import JSON
from ostinato.models.base import ToolDefinition
from ostinato.models.bodies import encode, request_body, tool_part
from ostinato.models.openai_chat import tool_wire

SCHEMA: JSON = {"type": "object", "properties": {"city": {"type": "string"}}}


def test_the_body_is_the_params_with_the_tools_last() -> None:
    tools = [ToolDefinition("weather", "Météo of a city", SCHEMA), ToolDefinition("t", "", {})]
    params: JSON = {"model": "m", "messages": [{"role": "user", "content": "héllo"}]}
    body = request_body({**params, "tools": ["ignored"]}, tools, tool_wire)
    assert json.loads(body) == {**params, "tools": [tool_wire(t) for t in tools]}
    assert list(json.loads(body))[-1] == "tools"
    assert "héllo".encode() in body and b": " not in body  # UTF-8 as is, compact
    assert request_body(params, [], tool_wire) == encode(params)  # no tools: no key
    assert json.loads(request_body({}, tools[:1], tool_wire)) == {"tools": [tool_wire(tools[0])]}


def test_a_tools_part_is_kept_while_its_definition_is_the_same() -> None:
    schema: JSON = {"type": "object", "properties": {"q": {"type": "string"}}}
    first = tool_part(ToolDefinition("search", "Find", schema), tool_wire)
    again = tool_part(ToolDefinition("search", "Find", schema), tool_wire)  # a turn later
    assert again is first
    told = tool_part(ToolDefinition("search", "Find things", schema), tool_wire)
    assert json.loads(told)["function"]["description"] == "Find things"
    remade = tool_part(ToolDefinition("search", "Find", {**schema, "required": ["q"]}), tool_wire)
    assert json.loads(remade)["function"]["parameters"]["required"] == ["q"]
