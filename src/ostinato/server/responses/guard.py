"""Keeps OpenAI's SDKs off ostinato's native ``/v1/conversations``.

The ``openai`` SDKs' ``client.conversations`` posts to ``{base_url}/conversations``;
with ``base_url`` ending in ``/v1`` that is ostinato's own route, whose shapes differ.
Such a request (an OpenAI SDK marks its requests with ``X-Stainless-*`` headers, and
its Python and JavaScript user agents start with ``OpenAI/``) is answered with a 400 in
OpenAI's shape that says where OpenAI's Conversations API is (``/openai/v1``), never read
as a native request.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

NATIVE = "/v1/conversations"
MESSAGE = (
    "this is ostinato's own conversations API; OpenAI's Conversations API (client."
    "conversations) is served under /openai/v1: set the client's base_url to "
    "http://HOST/openai/v1 (see docs/clients.md)"
)


def from_openai_sdk(headers: list[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name.startswith(b"x-stainless-"):
            return True
        if name == b"user-agent" and value.lower().startswith(b"openai/"):
            return True
    return False


class ConversationsGuard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        native = path == NATIVE or path.startswith(NATIVE + "/")
        if not native or not from_openai_sdk(scope.get("headers", [])):
            await self.app(scope, receive, send)
            return
        body = {
            "error": {
                "message": MESSAGE,
                "type": "invalid_request_error",
                "param": None,
                "code": "wrong_base_url",
            }
        }
        raw = json.dumps(body).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(raw)).encode()),
        ]
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": raw})
