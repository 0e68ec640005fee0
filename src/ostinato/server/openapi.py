"""The OpenAPI document: FastAPI's, plus what it cannot see by itself.

- ``Frame`` (and each frame, and ``MessageOut``) under ``components.schemas``: the SSE
  responses' events refer to it (``ostinato.server.frame_schema``);
- ``TurnRequest``: the turns route reads its body itself (JSON or a multipart form), so
  FastAPI does not know the model; the route's ``requestBody`` refers to it;
- a 413 answer on every operation that takes a body (``ostinato.server.limits``);
- optional query and header parameters without FastAPI's ``null`` alternative;
- the WebSocket (``/v1/conversations/{conversation_id}/ws``), which OpenAPI has no
  operation for, as an ``x-websocket`` extension of its path: what the server sends
  (frames) and what the client may send.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from ostinato.server.schemas import TurnRequest
from ostinato.server.ws_schemas import CLIENT_MESSAGE

COMPONENTS = "#/components/schemas/{model}"
WEBSOCKET_PATH = "/v1/conversations/{conversation_id}/ws"
TOO_LARGE = {
    "description": "The body is over its limit (`too_large`; see docs/api.md, Limits).",
    "content": {"application/json": {"schema": {"$ref": COMPONENTS.format(model="ErrorBody")}}},
}


def install_openapi(app: FastAPI) -> None:
    """Make ``app.openapi()`` (and ``/openapi.json``) return the extended document."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = extend(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def extend(document: dict[str, Any]) -> dict[str, Any]:
    # imported here: ``python -m ostinato.server.frame_schema`` must not find it imported
    from ostinato.server.frame_schema import frame_schemas

    schemas: dict[str, Any] = document.setdefault("components", {}).setdefault("schemas", {})
    frame, definitions = frame_schemas(COMPONENTS)
    _add(schemas, {"Frame": frame, **definitions})
    _add(schemas, _model_schemas(TurnRequest.model_json_schema(ref_template=COMPONENTS)))
    client = CLIENT_MESSAGE.json_schema(ref_template=COMPONENTS)
    _add(schemas, client.pop("$defs", {}))
    _add(schemas, {"ClientMessage": client})
    for path in document["paths"].values():
        for operation in path.values():
            for parameter in operation.get("parameters", []):
                if not parameter.get("required"):
                    _not_null(parameter["schema"])
            if "requestBody" in operation:
                operation["responses"].setdefault("413", TOO_LARGE)
    document["paths"][WEBSOCKET_PATH] = {"x-websocket": _websocket()}
    return document


def _not_null(schema: dict[str, Any]) -> None:
    """An optional query or header parameter is left out, never sent as null (a query
    string or a header has no null): its schema keeps only the non-null type."""
    options = schema.get("anyOf")
    if not isinstance(options, list) or {"type": "null"} not in options:
        return
    rest = [o for o in options if o != {"type": "null"}]
    del schema["anyOf"]
    if len(rest) == 1:
        schema.update(rest[0])
    else:
        schema["anyOf"] = rest
    if schema.get("default", ...) is None:
        del schema["default"]


def _model_schemas(schema: dict[str, Any]) -> dict[str, Any]:
    definitions: dict[str, Any] = schema.pop("$defs", {})
    return {schema["title"]: schema, **definitions}


def _add(schemas: dict[str, Any], new: dict[str, Any]) -> None:
    for name, schema in new.items():
        existing = schemas.get(name)
        if existing is None:
            schemas[name] = schema
        elif existing.get("title") != schema.get("title"):
            # two different things under one name would make a client's types lie
            raise RuntimeError(f"two schemas named {name!r} in the OpenAPI document")
        # else: the same model, as FastAPI already wrote it


def _websocket() -> dict[str, Any]:
    return {
        "summary": "The conversation on a WebSocket, both ways",
        "description": "Open with a WebSocket handshake (GET, `Upgrade: websocket`); "
        "query `after_seq` and `deltas` as on `/events`. The server sends frames, each one "
        "JSON text message, or `{type: error, code, message}` replies; the client sends "
        "the messages of `ClientMessage`. See docs/api.md.",
        "server-messages": {"$ref": COMPONENTS.format(model="Frame")},
        "client-messages": {"$ref": COMPONENTS.format(model="ClientMessage")},
    }
