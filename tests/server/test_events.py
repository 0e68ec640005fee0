"""``GET /v1/conversations/{id}/events``: replay of committed rows, then live frames,
with no gap and no duplicate between the two."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ostinato.bus import LocalBus
from ostinato.models.scripted import ScriptedModel, Step, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.server import create_app, end_streams
from ostinato.store.base import Store
from tests.server.sse_client import Event, Stream, open_stream


async def _turn(client: httpx.AsyncClient, cid: str, text: str) -> None:
    response = await client.post(f"/v1/conversations/{cid}/turns", json={"text": text})
    assert response.status_code == 200


def _message_seqs(events: list[Event]) -> list[int]:
    return [e.data["seq"] for e in events if e.event == "message"]


async def _messages_until_seq(stream: Stream, seq: int) -> list[Event]:
    out: list[Event] = []
    while not out or out[-1].event != "message" or out[-1].data["seq"] < seq:
        out.append(await stream.next_frame())
    return out


async def test_replays_rows_after_after_seq_then_streams_live(
    app: FastAPI, client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(text_step("one"), tool_step(("calculator", {"expression": "1+1"})), text_step("2"))
    await _turn(client, conversation_id, "first")  # rows 1, 2
    async with open_stream(
        app, "GET", f"/v1/conversations/{conversation_id}/events?after_seq=1"
    ) as stream:
        assert stream.status == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        replayed = await stream.next_frame()
        assert (replayed.event, replayed.id, replayed.data["seq"]) == ("message", "2", 2)
        assert replayed.data["message"]["blocks"] == [{"type": "text", "text": "one"}]
        assert replayed.data["run_id"]  # the run of the turn that wrote the row
        await _turn(client, conversation_id, "second")  # rows 3..6
        live = await stream.frames_until("turn.finished")
    types = [e.event for e in live]
    assert types[0] == "turn.started" and "tool.started" in types and "tool.finished" in types
    assert _message_seqs([replayed, *live]) == [2, 3, 4, 5, 6]
    for event in live:
        assert event.data["type"] == event.event
        assert event.id == (str(event.data["seq"]) if event.event == "message" else None)


async def test_last_event_id_wins_over_after_seq(
    app: FastAPI, client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(text_step("one"), text_step("two"))
    await _turn(client, conversation_id, "a")
    await _turn(client, conversation_id, "b")  # rows 1..4
    async with open_stream(
        app,
        "GET",
        f"/v1/conversations/{conversation_id}/events?after_seq=0",
        headers={"last-event-id": "2"},
    ) as stream:
        replayed = [await stream.next_frame(), await stream.next_frame()]
    assert _message_seqs(replayed) == [3, 4]


async def test_rows_committed_while_replaying_come_once(
    app: FastAPI,
    client: httpx.AsyncClient,
    runtime: Runtime,
    model: ScriptedModel,
    conversation_id: str,
) -> None:
    """A turn that commits rows between the subscription and the store read: its rows are
    both in the replay and in the live queue; each must reach the client once."""
    model.add(text_step("before"), text_step("during"), text_step("after"))
    await _turn(client, conversation_id, "before")  # rows 1, 2
    store: Any = runtime.store
    read = store.list_messages
    raced = False

    async def list_messages(*args: Any, **kwargs: Any) -> Any:
        nonlocal raced
        if not raced:
            raced = True
            await runtime.run_turn(conversation_id, "during")  # rows 3, 4, published live
        return await read(*args, **kwargs)

    store.list_messages = list_messages
    async with open_stream(app, "GET", f"/v1/conversations/{conversation_id}/events") as stream:
        first = await _messages_until_seq(stream, 4)
        assert raced
        await _turn(client, conversation_id, "after")  # rows 5, 6
        rest = await _messages_until_seq(stream, 6)
        rest += await stream.frames_until("turn.finished")
    events = first + rest
    assert _message_seqs(events) == [1, 2, 3, 4, 5, 6]
    # Of the racing turn's other frames, those older than row 4 are dropped (the replay
    # covered them); its turn.finished came after row 4, so it is sent.
    racing = [e.event for e in events if e.data["run_id"] == events[2].data["run_id"]]
    assert racing == ["message", "message", "turn.finished"]
    assert [e.event for e in rest][-1] == "turn.finished"


async def test_idle_stream_sends_pings_and_leaving_unsubscribes(
    app: FastAPI, runtime: Runtime, conversation_id: str
) -> None:
    async with open_stream(app, "GET", f"/v1/conversations/{conversation_id}/events") as stream:
        event = await stream.next_event(within=2)
        assert event.event is None and event.comments == ["ping"]
        assert event.raw == ": ping"
        for _ in range(2):  # and again for each interval of silence after it
            assert (await stream.next_event(within=2)).raw == ": ping"
        assert runtime.bus.subscriber_count(conversation_id) == 1
    assert runtime.bus.subscriber_count(conversation_id) == 0


async def test_bad_requests(client: httpx.AsyncClient, conversation_id: str) -> None:
    missing = await client.get("/v1/conversations/nope/events")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    url = f"/v1/conversations/{conversation_id}/events"
    for params, headers, expected in (
        ({"after_seq": "-1"}, {}, "after_seq"),
        ({"after_seq": "x"}, {}, "after_seq"),
        ({}, {"last-event-id": "abc"}, "Last-Event-ID"),
        ({}, {"last-event-id": "-3"}, "Last-Event-ID"),
    ):
        response = await client.get(url, params=params, headers=headers)
        assert response.status_code == 422, (params, headers)
        assert expected in response.json()["error"]["message"]


async def test_end_streams_closes_open_streams_with_a_closing_frame(
    app: FastAPI, runtime: Runtime, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(Step(text_step("slow").events, delay=0.2))
    turn_headers = {"accept": "text/event-stream", "content-type": "application/json"}
    async with (
        open_stream(app, "GET", f"/v1/conversations/{conversation_id}/events") as events,
        open_stream(
            app,
            "POST",
            f"/v1/conversations/{conversation_id}/turns",
            headers=turn_headers,
            body=b'{"text": "hi"}',
        ) as turn,
    ):
        assert (await turn.next_frame()).event == "turn.started"
        end_streams(app)
        for stream in (events, turn):
            last = (await stream.frames_until("error"))[-1]
            assert last.data["code"] == "closing"
            with pytest.raises(EOFError):
                await stream.next_event()
    assert runtime.bus.subscriber_count(conversation_id) == 0


async def test_a_stream_that_falls_behind_is_told_and_ended(store: Store) -> None:
    model = ScriptedModel([text_step("a b c d e f g h", chunks=8)])
    runtime = Runtime(store, model=model, bus=LocalBus(max_backlog=3))
    app = create_app(runtime)
    cid = (await runtime.create_conversation()).id
    async with open_stream(app, "GET", f"/v1/conversations/{cid}/events") as stream:
        await runtime.run_turn(cid, "go")  # publishes a burst faster than it is read
        events = await stream.frames_until("error")
        assert events[-1].data["code"] == "overflow"
        assert "Last-Event-ID" in events[-1].data["message"]
        with pytest.raises(EOFError):
            await stream.next_event()
    await runtime.close()
