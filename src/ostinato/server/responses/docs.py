"""The Responses API's routes as the OpenAPI document states them: bodies, answers and
errors (OpenAI's error shape). The rules a schema cannot say are in each description
and in docs/clients.md."""

from __future__ import annotations

from typing import Any

from ostinato.server.responses.wire import IGNORED, REFUSED

OPENAI_ERROR: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
        }
    },
}
RESPONSE: dict[str, Any] = {
    "type": "object",
    "required": ["id", "object", "status", "output"],
    "properties": {
        "id": {"type": "string"},
        "object": {"const": "response"},
        "status": {
            "enum": ["queued", "in_progress", "completed", "failed", "cancelled", "incomplete"]
        },
        "output": {"type": "array", "items": {"type": "object"}},
    },
}
EVENTS = {"text/event-stream": {"schema": {"type": "string"}}}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": OPENAI_ERROR}}}


ITEM = {
    "type": "object",
    "description": "A message ({role, content}: text only) or an mcp_approval_response; "
    "mcp_call, mcp_approval_request, mcp_list_tools and reasoning items are passed over.",
}
REQUEST: dict[str, Any] = {
    "type": "object",
    "required": ["input"],
    "properties": {
        "model": {
            "type": "string",
            "description": "`ostinato`, an agent's id, or a model /v1/models lists.",
        },
        "input": {
            "anyOf": [
                {"type": "string", "minLength": 1},
                {"type": "array", "minItems": 1, "items": ITEM},
            ]
        },
        "instructions": {"type": ["string", "null"]},
        "previous_response_id": {"type": ["string", "null"]},
        "conversation": {"anyOf": [{"type": "string"}, {"type": "object"}, {"type": "null"}]},
        "stream": {"type": ["boolean", "null"]},
        "background": {"type": ["boolean", "null"]},
        "store": {"type": ["boolean", "null"]},
        "metadata": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
        "tools": {
            "type": ["array", "null"],
            "items": {"type": "object"},
            "description": "Only {type: mcp, server_label: ostinato}: the agent's own tools.",
        },
    },
}
CREATE_DOC: dict[str, Any] = {
    "summary": "Create a response (OpenAI's Responses API)",
    "description": (
        "The request continues the conversation of `previous_response_id` (from an "
        "earlier response than the newest, on a new branch) or `conversation`, or opens "
        "one. Refused with "
        f"a 400: {', '.join(sorted(REFUSED))}; client tools other than the agent's own "
        "(an `mcp` tool with server_label `ostinato`); `text.format` other than text; "
        "`tool_choice` other than auto; both previous_response_id and conversation; "
        "background with store false; an input whose last message is not the user's. "
        f"Accepted and left alone: {', '.join(sorted(IGNORED))}. See docs/clients.md."
    ),
    "responses": {
        200: {
            "description": "The response; with `stream: true` its events.",
            "content": {"application/json": {"schema": RESPONSE}, **EVENTS},
        },
        400: _error("A request this endpoint cannot answer (see the description)."),
        404: _error("An unknown model, response, conversation or approval request."),
        409: _error("The approval answered was already decided."),
        422: _error("Query or header parameters that do not validate."),
        429: _error("Over a limit; see Retry-After."),
    },
    "openapi_extra": {
        "requestBody": {"required": True, "content": {"application/json": {"schema": REQUEST}}}
    },
}
_FOUND = {404: _error("No such response (or another owner's).")}
ROUTE_DOCS: dict[str, dict[str, Any]] = {
    "get": {
        "summary": "Retrieve a response",
        "responses": {
            200: {
                "description": "The response; with `stream=true` its events after "
                "`starting_after`, live until it ends.",
                "content": {"application/json": {"schema": RESPONSE}, **EVENTS},
            },
            **_FOUND,
            429: _error("Over the open streams limit."),
        },
    },
    "delete": {
        "summary": "Delete a stored response",
        "responses": {
            200: {"description": "It is deleted; its conversation's rows stay."},
            **_FOUND,
        },
    },
    "cancel": {
        "summary": "Cancel a response",
        "responses": {
            200: {
                "description": "The response, cancelled (or as it ended).",
                "content": {"application/json": {"schema": RESPONSE}},
            },
            **_FOUND,
            409: _error("Its message still waits for its turn."),
        },
    },
    "input_items": {
        "summary": "A response's input items",
        "responses": {200: {"description": "A list of items."}, **_FOUND},
    },
}
