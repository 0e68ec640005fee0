"""The lean streamed call (``models.sse_http.Channel``) for each SDK's server.

A channel sends what the SDK client would: its base URL, its headers (the key among
them) and its connect timeout. What comes back wrong is made into the SDK's own exception
by the SDK client itself, so each adapter classifies it as it always has
(``openai_chat.openai_failure``, ``anthropic.failure``):

- an HTTP error status: the body read whole, handed to the client as the response it
  would have had (``_make_status_error_from_response``: its typed ``APIStatusError``
  subclass, its ``body``, the ``retry-after`` headers kept);
- an error inside the stream, by each SDK's own rule: for ``openai``, any event whose JSON
  has an ``error`` (its ``APIError``, with the SDK's words when it has no message); for
  ``anthropic``, an ``error`` event (the status error it makes of the stream's response),
  while ``ping`` events and events without a name are skipped, as the SDK skips them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ostinato.models.failures import Endpoint
from ostinato.models.sse_http import SKIP, Channel, EventRule, StatusError

if TYPE_CHECKING:
    import anthropic
    import openai

_NO_MESSAGE = "An error occurred during streaming"  # the openai SDK's words


def channel_for(
    client: openai.AsyncOpenAI | anthropic.AsyncAnthropic, endpoint: Endpoint
) -> Channel:
    """The lean path to ``client``'s server, with errors as ``client``'s SDK makes them."""
    import httpx2  # the SDKs' HTTP client, loaded with them

    headers = {k: v for k, v in client.default_headers.items() if isinstance(v, str)}
    timeout = client.timeout
    connect = timeout.connect if isinstance(timeout, httpx2.Timeout) else None
    anthropic_sdk = type(client).__module__.startswith("anthropic")
    event = _anthropic_event(client) if anthropic_sdk else _openai_event
    return Channel(
        str(client.base_url),
        headers | client.auth_headers,
        endpoint,
        connect=connect or 0.0,
        status_error=_status_error(client),
        event=event,
    )


def json_body(body: Mapping[str, Any]) -> bytes:
    """A request body as the SDKs' HTTP client encodes one (compact, UTF-8)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _status_error(client: Any) -> StatusError:
    def status_error(status: int, head: Mapping[str, str], raw: bytes, url: str) -> Exception:
        response = _response(status, head, raw, url)
        made: Exception = client._make_status_error_from_response(response)
        return made

    return status_error


def _response(status: int, head: Mapping[str, str], raw: bytes, url: str) -> Any:
    import httpx2

    request = httpx2.Request("POST", url)
    return httpx2.Response(status, headers=head, content=raw, request=request)


def _openai_event(name: bytes | None, data: bytes, url: str) -> Any:
    payload = json.loads(data)
    if isinstance(payload, dict) and payload.get("error"):
        import httpx2
        import openai

        error = payload["error"]
        message = error.get("message") if isinstance(error, dict) else None
        if not isinstance(message, str) or not message:
            message = _NO_MESSAGE
        raise openai.APIError(message, httpx2.Request("POST", url), body=error)
    return payload


def _anthropic_event(client: Any) -> EventRule:
    def event(name: bytes | None, data: bytes, url: str) -> Any:
        if name is None or name == b"ping":
            return SKIP
        if name == b"error":
            text = data.decode(errors="replace")
            try:
                body: Any = json.loads(data)
                message = f"{body}"
            except ValueError:
                body, message = text, text or "Error code: 200"
            response = _response(200, {}, b"", url)
            raise client._make_status_error(message, body=body, response=response)
        if not data:
            return SKIP
        return json.loads(data)

    return event
