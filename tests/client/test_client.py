"""``ostinato.client`` against a live server (the app under uvicorn, a scripted model):
typed frames and results, cards, approvals, cancel, uploads, memories, the event stream
and its reconnect position, errors as typed exceptions, the tree (edit, regenerate,
branches, switch); the same with ``AsyncClient``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from ostinato.client import (
    AsyncClient,
    Client,
    Conflict,
    EventCursor,
    InvalidRequest,
    NotFound,
    TransportError,
    Unauthorized,
)
from ostinato.frames import (
    ApprovalRequested,
    ErrorFrame,
    InputRequested,
    MessageCommitted,
    TextDeltaFrame,
    ToolFinished,
    TurnFinished,
    TurnStarted,
)
from ostinato.messages import FileBlock, Message, TextBlock
from ostinato.models.scripted import Step, text_step, tool_step
from tests.cli.conftest import LiveServer
from tests.client.proxy import proxy_to


def test_a_turn_as_a_result_and_as_typed_frames(live_server: LiveServer) -> None:
    live_server.model.add(text_step("Hello."), text_step("Again.", chunks=2))
    with Client(live_server.url) as client:
        conversation = client.create_conversation(title="Hi")
        assert conversation.title == "Hi" and conversation.state == "idle"
        result = client.send(conversation.id, "hello")
        assert result.stop_reason == "end_turn" and result.text == "Hello."
        assert isinstance(result.messages[0], Message) and result.messages[0].text == "hello"
        frames = list(client.stream(conversation.id, "again"))
        assert isinstance(frames[0], TurnStarted) and isinstance(frames[-1], TurnFinished)
        deltas = [f.text for f in frames if isinstance(f, TextDeltaFrame)]
        assert "".join(deltas) == "Again."
        rows = [f.message for f in frames if isinstance(f, MessageCommitted)]
        assert [r.role for r in rows] == ["user", "assistant"] and rows[1].seq == 4
        stored = client.messages(conversation.id)
        assert [m.text for m in stored] == ["hello", "Hello.", "again", "Again."]
        page, _ = client.list_conversations(limit=5)
        assert conversation.id in [c.id for c in page]


def test_a_card_is_answered_and_the_turn_goes_on(live_server: LiveServer) -> None:
    card = {"question": "Which colour?", "options": ["red", "blue"]}
    live_server.model.add(tool_step(("ask_user", card)), text_step("Blue it is."))
    with Client(live_server.url) as client:
        cid = client.create_conversation().id
        frames = list(client.stream(cid, "paint it"))
        asked = next(f for f in frames if isinstance(f, InputRequested))
        assert asked.input == card
        assert isinstance(frames[-1], TurnFinished) and frames[-1].stop_reason == "paused"
        answered = list(client.stream_answer(cid, asked.tool_use_id, "blue"))
        assert isinstance(answered[-1], TurnFinished)
        assert answered[-1].stop_reason == "end_turn"
        with pytest.raises(Conflict):
            client.answer_card(cid, asked.tool_use_id, "red")


def test_an_approval_is_decided_while_the_turn_streams(live_server: LiveServer) -> None:
    call = ("shell", {"command": "echo approved-by-client"})
    live_server.model.add(tool_step(call), text_step("Done."))
    with Client(live_server.url) as client:
        cid = client.create_conversation().id
        seen = []
        for frame in client.stream(cid, "run it"):
            seen.append(frame)
            if isinstance(frame, ApprovalRequested):
                assert [a["id"] for a in client.approvals(cid, pending=True)] == [frame.approval_id]
                client.decide(cid, frame.approval_id, approve=True)
        finished = [f for f in seen if isinstance(f, ToolFinished)]
        assert finished and "approved-by-client" in finished[0].result
        with pytest.raises(Conflict):
            client.cancel(cid)  # nothing runs, nothing waits


def test_cancel_ends_a_running_turn(live_server: LiveServer) -> None:
    live_server.model.add(Step(text_step("slow " * 50, chunks=50).events, delay=0.05))
    with Client(live_server.url) as client:
        cid = client.create_conversation().id
        ended = []
        for frame in client.stream(cid, "go"):
            if isinstance(frame, TextDeltaFrame) and not ended:
                ended.append(client.cancel(cid))
            last = frame
        assert ended[0]["cancelled_turn"]
        assert isinstance(last, TurnFinished) and last.stop_reason == "cancelled"


def test_files_and_memories(live_server: LiveServer) -> None:
    live_server.model.add(text_step("Read it."))
    with Client(live_server.url) as client:
        cid = client.create_conversation().id
        client.send(
            cid, "see the notes", files=[("notes.md", b"# Notes\nbuy milk", "text/markdown")]
        )
        user = client.messages(cid)[0]
        assert isinstance(user.blocks[0], TextBlock)
        assert any(isinstance(b, FileBlock) and b.name == "notes.md" for b in user.blocks)
        fact = client.remember("Ann likes tea")
        assert [m["fact"] for m in client.memories()] == ["Ann likes tea"]
        assert client.forget(fact["id"])["current"] is False


def test_errors_are_typed(live_server: LiveServer, keyed_server: LiveServer) -> None:
    with Client(live_server.url) as client:
        with pytest.raises(NotFound) as missing:
            client.conversation("nope")
        assert missing.value.status == 404 and missing.value.code == "not_found"
        cid = client.create_conversation().id
        with pytest.raises(InvalidRequest):
            client.send(cid, "")
    with Client(keyed_server.url) as client, pytest.raises(Unauthorized):
        client.create_conversation()
    with Client(keyed_server.url, key=keyed_server.key) as client:
        assert client.create_conversation().owner == "ann"
    with Client("http://127.0.0.1:9") as client, pytest.raises(TransportError):
        client.create_conversation()


def test_events_replay_then_go_live_and_remember_where_they_are(
    live_server: LiveServer,
) -> None:
    live_server.model.add(text_step("one"), text_step("two"))
    with Client(live_server.url) as client:
        cid = client.create_conversation().id
        client.send(cid, "first")
        got: list[object] = []

        def send_later() -> None:
            with Client(live_server.url) as other:
                other.send(cid, "second")

        sender = threading.Thread(target=send_later)
        for frame in client.events(cid, after_seq=1):
            got.append(frame)
            if len(got) == 1:
                sender.start()
            if isinstance(frame, TurnFinished):
                break
        sender.join(10)
        rows = [f.message.text for f in got if isinstance(f, MessageCommitted)]
        assert rows == ["one", "second", "two"]
    cursor = EventCursor(0)
    row = Message("assistant", (TextBlock("x"),), seq=7)
    assert cursor.see(MessageCommitted(run_id="r", seq=7, message=row))
    assert not cursor.see(ErrorFrame(run_id="", seq=7, code="closing", message="bye"))
    assert cursor.headers()["last-event-id"] == "7"


async def test_the_async_client_does_the_same(live_server: LiveServer) -> None:
    live_server.model.add(text_step("Hi."), text_step("Streamed."))
    async with AsyncClient(live_server.url) as client:
        cid = (await client.create_conversation()).id
        assert (await client.send(cid, "hello")).text == "Hi."
        frames = [f async for f in client.stream(cid, "again")]
        assert isinstance(frames[-1], TurnFinished)
        assert [m.text for m in await client.messages(cid)][-1] == "Streamed."
        with pytest.raises(NotFound):
            await client.conversation("nope")


def test_edit_regenerate_and_switch_branches(live_server: LiveServer) -> None:
    live_server.model.add(text_step("A1"), text_step("A2"), text_step("A3"))
    with Client(live_server.url) as client:
        cid = client.create_conversation().id
        client.send(cid, "first")
        assert client.edit(cid, 1, "edited").text == "A2"
        frames = list(client.stream_regenerate(cid, 4))
        assert [f.type for f in frames[:2]] == ["turn.started", "branch.changed"]
        assert [m.text for m in client.messages(cid)] == ["edited", "A3"]
        found = client.branches(cid)
        assert [(leaf["seq"], leaf["current"]) for leaf in found["leaves"]] == [
            (2, False), (4, False), (5, True),
        ]  # fmt: skip
        client.switch_branch(cid, 2)
        assert [m.text for m in client.messages(cid)] == ["first", "A1"]
        with pytest.raises(InvalidRequest):
            client.regenerate(cid, 1)  # a user row: not an answer


async def test_the_async_client_edits_and_switches(live_server: LiveServer) -> None:
    live_server.model.add(text_step("A1"), text_step("A2"), text_step("A3"))
    async with AsyncClient(live_server.url) as client:
        cid = (await client.create_conversation()).id
        await client.send(cid, "first")
        assert (await client.edit(cid, 1, "edited")).text == "A2"
        assert (await client.regenerate(cid, 4)).text == "A3"
        assert len((await client.branches(cid))["leaves"]) == 3
        await client.switch_branch(cid, 2)
        assert [m.text for m in await client.messages(cid)] == ["first", "A1"]


def _rows_until(events: Iterator[object], seq: int) -> list[int]:
    seen: list[int] = []
    for frame in events:
        if isinstance(frame, MessageCommitted):
            seen.append(frame.message.seq or 0)
            if seen[-1] >= seq:
                return seen
    raise AssertionError("the stream ended")


def test_a_broken_connection_reconnects_from_the_last_row_seen(live_server: LiveServer) -> None:
    live_server.model.add(text_step("one"), text_step("two"))
    with Client(live_server.url) as direct:
        cid = direct.create_conversation().id
        direct.send(cid, "first")  # rows 1 and 2
    with proxy_to(live_server.url) as proxy, Client(proxy.url) as client:
        events = client.events(cid, deltas=False)
        assert _rows_until(events, 2) == [1, 2]  # the replay
        proxy.cut()  # the network fails mid-stream
        with Client(live_server.url) as direct:
            direct.send(cid, "second")  # rows 3 and 4, while the stream is down
        began = time.monotonic()
        assert _rows_until(events, 4) == [3, 4]  # nothing missed, nothing twice
        waited = time.monotonic() - began
    opened = [h.lower() for h in proxy.heads if h.startswith("GET ") and "/events" in h]
    assert len(opened) == 2
    assert "last-event-id: 0" in opened[0] and "last-event-id: 2" in opened[1]
    assert waited >= EventCursor.BACKOFF_S[0]  # it backed off before reconnecting


def test_reconnects_back_off_and_give_up_after_the_last_wait() -> None:
    cursor = EventCursor(0)
    waits = []
    while not cursor.exhausted:
        waits.append(cursor.backoff())
    assert waits == list(EventCursor.BACKOFF_S) and waits == sorted(waits) and waits[0] > 0
    row = Message("assistant", (TextBlock("x"),), seq=3)
    assert cursor.see(MessageCommitted(run_id="r", seq=3, message=row))  # a frame came
    assert not cursor.exhausted and cursor.backoff() == EventCursor.BACKOFF_S[0]
    closing = ErrorFrame(run_id="", seq=3, code="closing", message="bye")
    assert not cursor.see(closing) and cursor.attempts == 1  # asking back is no frame
