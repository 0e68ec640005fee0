"""Several surfaces on one conversation: every surface sees the committed rows; the
turn's own stream always gets the deltas, a peer may leave them out; the sender's
``client_message_id`` comes back on the user row so it can drop its own echo."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from ostinato.models.base import Retrying, Stop, TextDelta, Usage
from ostinato.models.scripted import ScriptedModel, Step, tool_step
from tests.server.people import sse_turn
from tests.server.sse_client import open_stream
from tests.server.ws_client import open_websocket

EPHEMERAL = {"text.delta", "thinking.delta", "text.discarded", "tool.progress"}


async def test_peers_see_rows_and_the_echo_the_sender_drops(
    app: FastAPI, model: ScriptedModel, conversation_id: str
) -> None:
    retried = Step(
        (
            TextDelta("It "),
            Retrying(1, 0.0, "overloaded"),  # what the first attempt showed is discarded
            TextDelta("It is "),
            TextDelta("42."),
            Usage(5, 5),
            Stop("end_turn"),
        )
    )
    model.add(tool_step(("calculator", {"expression": "6*7"})), retried)
    base = f"/v1/conversations/{conversation_id}"
    async with (
        open_stream(app, "GET", f"{base}/events?deltas=false") as rows_only,
        open_stream(app, "GET", f"{base}/events") as everything,
        open_websocket(app, f"{base}/ws?deltas=false") as socket,
    ):
        body = {"text": "6*7?", "client_message_id": "bubble-7"}
        async with sse_turn(app, conversation_id, body) as sender:
            own = [e.data for e in await sender.frames_until("turn.finished")]
        peer = [e.data for e in await rows_only.frames_until("turn.finished")]
        full = [e.data for e in await everything.frames_until("turn.finished")]
        ws = await socket.until("turn.finished")

    # The surface that started the turn gets the deltas; so does a peer that asks for them.
    assert sum(f["type"] == "text.delta" for f in own) == 3
    assert sum(f["type"] == "text.discarded" for f in own) == 1
    assert [f["type"] for f in full] == [f["type"] for f in own]
    # Peers that asked for rows only get every row and turn event, and no progress frame.
    for frames in (peer, ws):
        assert not EPHEMERAL & {f["type"] for f in frames}
        assert _rows(frames) == _rows(own)
        assert [f["type"] for f in frames] == [f["type"] for f in own if f["type"] not in EPHEMERAL]

    # Every surface sees the sender's id on the user row; the sender drops its own echo.
    for frames in (own, peer, full, ws):
        user = next(f for f in frames if f["type"] == "message")
        assert user["client_message_id"] == "bubble-7"
        assert user["message"]["metadata"]["client_message_id"] == "bubble-7"
    mine = {"bubble-7"}
    shown = [f for f in own if f["type"] == "message" and f["client_message_id"] not in mine]
    assert [f["message"]["role"] for f in shown] == ["assistant", "tool", "assistant"]


def _rows(frames: list[Any]) -> list[tuple[int, str]]:
    return [(f["seq"], f["message"]["role"]) for f in frames if f["type"] == "message"]
