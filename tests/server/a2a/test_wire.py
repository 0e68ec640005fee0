"""The A2A envelope and message reading (server.a2a.wire): what is refused, and as which
A2A error; a body that is no JSON-RPC request is answered with a 400."""

from __future__ import annotations

from typing import Any

import pytest

from ostinato.server.a2a.wire import (
    ContentTypeNotSupported,
    InvalidParams,
    InvalidRequest,
    ParseError,
    PushNotSupported,
    read_call,
    read_send,
)

TEXT = [{"text": "x"}]


@pytest.mark.parametrize(
    "params",
    [
        {"message": {"role": "ROLE_USER", "parts": TEXT}, "configuration": "x"},
        {"message": "x"},
        {"message": {"role": "ROLE_AGENT", "parts": TEXT}},
        {"message": {"role": "ROLE_USER", "parts": []}},
        {"message": {"role": "ROLE_USER", "parts": [1]}},
        {"message": {"role": "ROLE_USER", "parts": TEXT, "taskId": 5}},
        {"message": {"role": "ROLE_USER", "parts": TEXT}, "configuration": {"historyLength": -1}},
    ],
)
def test_a_bad_message_is_invalid_params(params: dict[str, Any]) -> None:
    with pytest.raises(InvalidParams):
        read_send(params)


def test_files_and_push_notifications_are_refused_as_such() -> None:
    with pytest.raises(ContentTypeNotSupported):
        read_send({"message": {"role": "ROLE_USER", "parts": [{"url": "http://x"}]}})
    push = {"taskPushNotificationConfig": {"url": "http://x"}}
    with pytest.raises(PushNotSupported):
        read_send({"message": {"role": "ROLE_USER", "parts": TEXT}, "configuration": push})


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (b"{", ParseError),
        (b"[]", InvalidRequest),
        (b'{"jsonrpc": "1.0", "id": 3, "method": "x"}', InvalidRequest),
        (b'{"jsonrpc": "2.0", "method": "x", "params": 3}', InvalidRequest),
        (b'{"jsonrpc": "2.0", "id": 1.5, "method": "x"}', InvalidRequest),
    ],
)
def test_a_body_that_is_no_request_is_a_400(raw: bytes, kind: type[Exception]) -> None:
    with pytest.raises(kind) as raised:
        read_call(raw)
    assert raised.value.http_status == 400  # type: ignore[attr-defined]
