"""The Responses stream's fast way to a text delta's event (``EventLog.delta_bytes``,
taken by the live stream while a message is open) writes the bytes the general way
(``EventLog.delta``, then ``Delta.encode``) writes, with the same numbers."""

from __future__ import annotations

import json

from ostinato.server.responses.events import Delta, EventLog

TEXTS = ["Hello", ", ", 'she said "hi"', "\n", "naïve 🎻", "\\", "</script>", "\u2028 end"]


def _log() -> EventLog:
    return EventLog("resp_abc", lambda status, output, extra: {"status": status})


def test_the_fast_delta_is_the_general_one_byte_for_byte() -> None:
    fast, general = _log(), _log()
    fast.begin(False), general.begin(False)
    assert fast.delta_bytes("x") is None  # no message open yet: the general way opens it
    fast.delta("x"), general.delta("x")
    for text in TEXTS:
        made = fast.delta_bytes(text)
        (event,) = general.delta(text)
        assert isinstance(event, Delta) and made == event.encode()
        data = json.loads(made.decode().split("data: ", 1)[1])
        assert data["delta"] == text and data["sequence_number"] == event.number
    assert fast.delta_bytes("") is None
    assert fast.close_text() == general.close_text()
    assert fast.delta_bytes("more") is None  # closed: the next text opens a new message
