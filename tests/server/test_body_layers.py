"""The body limit's layers (issue 32 item 3): a request whose body has a declared length
within its limit (or no body) reaches the app with the server's own ``receive`` and
``send``, unwrapped, since it cannot be longer than it said; only a chunked body is
counted as it arrives (tests/server/test_limits.py checks the limits themselves)."""

from __future__ import annotations

from typing import Any

from starlette.middleware.body_limit import MAX_BODY_SIZE_SCOPE_KEY

from ostinato.server.limits import BodyLimit, BodyLimits


async def seen_by_app(headers: list[tuple[bytes, bytes]]) -> tuple[bool, bool]:
    got: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        got.update(limit=scope.get(MAX_BODY_SIZE_SCOPE_KEY), receive=receive, send=send)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: Any) -> None:
        return None

    scope = {"type": "http", "method": "POST", "path": "/v1/x", "headers": headers}
    await BodyLimit(app, BodyLimits())(scope, receive, send)  # type: ignore[arg-type]
    unwrapped = got["receive"] is receive and got["send"] is send
    return unwrapped, got["limit"] == BodyLimits().message_bytes  # errors.py reads it


async def test_a_declared_length_goes_through_unwrapped() -> None:
    unwrapped, limited = await seen_by_app([(b"content-length", b"2")])
    assert unwrapped and limited


async def test_no_body_goes_through_unwrapped() -> None:
    unwrapped, limited = await seen_by_app([])
    assert unwrapped and limited


async def test_a_chunked_body_is_counted() -> None:
    unwrapped, limited = await seen_by_app([(b"transfer-encoding", b"chunked")])
    assert not unwrapped and limited
