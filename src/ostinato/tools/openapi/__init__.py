"""Tools from an OpenAPI document: each operation a tool.

``openapi_tools(document)`` reads an OpenAPI 3.0 or 3.1 document and makes one ``Tool``
per operation:

- the **name** is the ``operationId`` (else method and path), sanitised, optionally
  prefixed; two operations with one name are a ``ToolSourceError``;
- the **parameters** schema holds one property per path, query and header parameter, and
  ``body`` for a JSON (or form) request body; local ``$ref``s are inlined (a recursive one
  becomes an open schema), OpenAPI 3.0's ``nullable`` and boolean ``exclusiveMinimum``
  become JSON Schema, and an ``allOf`` of plain object schemas is merged into one;
- the **call** substitutes and URL-encodes path parameters, sends query parameters,
  headers and the body with httpx, with the configured auth and timeout; a response of
  400 or more is a ``ToolError`` with its status and the start of its body; any other is
  returned as JSON (when it is JSON) or text, cut at a cap;
- the **risk**: GET and HEAD operations are ``network`` reads, idempotent; every other
  method is ``write``, not idempotent, so an approval policy asks before it runs.

Cookie parameters and request bodies that are neither JSON nor form-encoded are not
supported: such an operation still becomes a tool without them, and a required one
makes the operation be left out (logged).

Modules: ``document`` (loading, the base URL), ``schemas`` (OpenAPI schemas as JSON
Schema), ``operations`` (each operation's arguments), ``calling`` (requests, responses,
auth, and ``openapi_tools``).
"""

from ostinato.tools.openapi.calling import (
    ApiKeyAuth,
    Auth,
    BasicAuth,
    BearerAuth,
    build_request,
    openapi_tools,
    read_response,
)
from ostinato.tools.openapi.document import load_openapi, parse_document, server_url
from ostinato.tools.openapi.operations import Operation, Parameter, read_operations

__all__ = [
    "ApiKeyAuth",
    "Auth",
    "BasicAuth",
    "BearerAuth",
    "Operation",
    "Parameter",
    "build_request",
    "load_openapi",
    "openapi_tools",
    "parse_document",
    "read_operations",
    "read_response",
    "server_url",
]
