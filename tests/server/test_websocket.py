"""``/v1/conversations/{id}/ws``: the conversation's frames (replay, then live) as JSON
messages, the client's messages handled in order, errors as replies, the Origin check."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ostinato.approvals import ApprovalPolicy
from ostinato.errors import StoreError
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.server import create_app, end_streams
from ostinato.store.base import Store
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.registry import ToolRegistry
from tests.server.people import deploy_tool, eventually
from tests.server.ws_client import Closed, Refused, Socket, open_websocket


async def _turn(client: httpx.AsyncClient, cid: str, text: str) -> None:
    response = await client.post(f"/v1/conversations/{cid}/turns", json={"text": text})
    assert response.status_code == 200


def _seqs(frames: list[Any]) -> list[int]:
    return [f["seq"] for f in frames if f["type"] == "message"]


async def _messages_until_seq(socket: Socket, seq: int) -> list[Any]:
    out: list[Any] = []
    while not out or out[-1]["type"] != "message" or out[-1]["seq"] < seq:
        out.append(await socket.receive_json())
    return out


async def test_replays_rows_then_streams_live_frames(
    app: FastAPI, client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(text_step("one"), tool_step(("calculator", {"expression": "1+1"})), text_step("2"))
    await _turn(client, conversation_id, "first")  # rows 1, 2
    path = f"/v1/conversations/{conversation_id}/ws?after_seq=1"
    async with open_websocket(app, path) as socket:
        replayed = await socket.receive_json()
        assert replayed["type"] == "message" and replayed["seq"] == 2 and replayed["run_id"]
        assert replayed["message"]["blocks"] == [{"type": "text", "text": "one"}]
        await _turn(client, conversation_id, "second")  # rows 3..6
        live = await socket.until("turn.finished")
    types = [f["type"] for f in live]
    assert types[0] == "turn.started" and "tool.started" in types and "text.delta" in types
    assert _seqs([replayed, *live]) == [2, 3, 4, 5, 6]


async def test_a_message_sent_over_the_socket_starts_a_turn(
    app: FastAPI, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(text_step("Hello back.", chunks=2))
    async with open_websocket(app, f"/v1/conversations/{conversation_id}/ws") as socket:
        await socket.send_json({"type": "message", "text": "hello", "client_message_id": "m-1"})
        frames = await socket.until("turn.finished")
    user = next(f for f in frames if f["type"] == "message")
    assert user["message"]["role"] == "user" and user["client_message_id"] == "m-1"
    assert "".join(f["text"] for f in frames if f["type"] == "text.delta") == "Hello back."
    assert frames[-1]["stop_reason"] == "end_turn"


async def test_bad_messages_get_an_error_reply_and_the_socket_stays_open(
    app: FastAPI, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(text_step("fine"))
    cases: list[tuple[str | bytes, str, str]] = [
        ("not json", "invalid_request", "not valid JSON"),
        ("[1, 2]", "invalid_request", "JSON object with a type"),
        ('{"text": "hi"}', "invalid_request", "JSON object with a type"),
        ('{"type": "shout"}', "invalid_request", "type must be one of"),
        ('{"type": "message"}', "invalid_request", "text is required"),
        ('{"type": "message", "text": "  "}', "invalid_request", "text must not be empty"),
        ('{"type": "message", "text": "x", "policy": "now"}', "invalid_request", "policy"),
        ('{"type": "approval", "approval_id": "a"}', "invalid_request", "decision is required"),
        (
            '{"type": "approval", "approval_id": "a", "decision": "decline", "remember": "exact"}',
            "invalid_request",
            "remember goes with decision",
        ),
        (b"\x00binary", "invalid_request", "text messages"),
        ('{"type": "cancel"}', "conflict", "nothing to cancel"),
        ('{"type": "tool_response", "tool_use_id": "x", "result": 1}', "conflict", "card"),
        (
            '{"type": "approval", "approval_id": "nope", "decision": "approve"}',
            "not_found",
            "no approval",
        ),
    ]
    async with open_websocket(app, f"/v1/conversations/{conversation_id}/ws") as socket:
        for raw, code, expected in cases:
            if isinstance(raw, bytes):
                await socket.send_bytes(raw)
            else:
                await socket.send_text(raw)
            reply = await socket.receive_json()
            assert reply == {"type": "error", "code": code, "message": reply["message"]}, raw
            assert expected in reply["message"], (raw, reply)
        await socket.send_json({"type": "message", "text": "still there?"})
        frames = await socket.until("turn.finished")
    assert frames[-1]["stop_reason"] == "end_turn"


async def test_cards_approvals_and_cancel_over_the_socket(store: Store) -> None:
    runs: list[str] = []
    model = ScriptedModel(
        [
            tool_step(("ask_user", {"question": "Where?"}, "card1")),
            tool_step(("deploy", {"target": "prod"})),
            text_step("Deployed."),
            tool_step(("deploy", {"target": "staging"})),
        ]
    )
    runtime = Runtime(
        store,
        model=model,
        tools=ToolRegistry([deploy_tool(runs), *builtin_tools()]),
        approvals=ApprovalPolicy(timeout=60),
    )
    app = create_app(runtime)
    cid = (await runtime.create_conversation()).id
    async with open_websocket(app, f"/v1/conversations/{cid}/ws") as socket:
        await socket.send_json({"type": "message", "text": "deploy"})
        paused = await socket.until("turn.finished")
        card = next(f for f in paused if f["type"] == "input.requested")
        assert paused[-1]["stop_reason"] == "paused"

        await socket.send_json(
            {"type": "tool_response", "tool_use_id": card["tool_use_id"], "result": "prod"}
        )
        asked = (await socket.until("approval.requested"))[-1]
        await socket.send_json(
            {"type": "approval", "approval_id": asked["approval_id"], "decision": "approve"}
        )
        resumed = await socket.until("turn.finished")
        decided = next(f for f in resumed if f["type"] == "approval.decided")
        assert decided["ending"] == "APPROVED" and resumed[-1]["stop_reason"] == "end_turn"
        assert runs == ["prod"]

        await socket.send_json({"type": "message", "text": "and staging"})
        await socket.until("approval.requested")
        await socket.send_json({"type": "cancel"})
        cancelled = await socket.until("turn.finished")
    assert cancelled[-1]["stop_reason"] == "cancelled" and runs == ["prod"]
    endings = [a.ending for a in await store.list_approvals(cid)]
    assert [str(e) for e in endings] == ["APPROVED", "DECLINED"]
    await runtime.close()


async def test_reconnecting_with_after_seq_loses_nothing_and_repeats_nothing(
    app: FastAPI, client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(text_step("a"), text_step("b"), text_step("c"))
    path = f"/v1/conversations/{conversation_id}/ws"
    await _turn(client, conversation_id, "one")  # rows 1, 2
    async with open_websocket(app, path) as socket:
        seen = await _messages_until_seq(socket, 2)
    await _turn(client, conversation_id, "two")  # rows 3, 4, while nobody watched
    last = max(_seqs(seen))
    async with open_websocket(app, f"{path}?after_seq={last}") as socket:
        seen += await _messages_until_seq(socket, 4)
        await _turn(client, conversation_id, "three")  # rows 5, 6, live
        seen += await socket.until("turn.finished")
    assert _seqs(seen) == [1, 2, 3, 4, 5, 6]


async def test_deltas_false_leaves_out_progress_frames(
    app: FastAPI, client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(text_step("a long reply in pieces", chunks=4))
    async with open_websocket(app, f"/v1/conversations/{conversation_id}/ws?deltas=false") as ws:
        await _turn(client, conversation_id, "go")
        frames = await ws.until("turn.finished")
    assert [f["type"] for f in frames] == ["turn.started", "message", "message", "turn.finished"]


async def test_the_origin_is_checked_before_accepting(
    runtime: Runtime, conversation_id: str
) -> None:
    app = create_app(runtime, allowed_origins=["https://chat.example.com/"])
    path = f"/v1/conversations/{conversation_id}/ws"
    for origin in (
        None,
        "http://127.0.0.1:8000",
        "http://localhost:8000",
        "https://CHAT.example.com",
    ):
        headers = {"origin": origin} if origin else {}
        async with open_websocket(app, path, headers=headers, server=("127.0.0.1", 8000)):
            pass
    for origin in (
        "http://evil.example",
        "http://localhost:9999",
        "null",
        "https://127.0.0.1:8000",
    ):
        with pytest.raises(Refused) as refused:
            async with open_websocket(app, path, headers={"origin": origin}):
                pass
        assert refused.value.status == 403, origin
        assert refused.value.body["error"]["code"] == "forbidden"


async def test_the_allowed_origins_are_allowed(runtime: Runtime, conversation_id: str) -> None:
    app = create_app(runtime, allowed_origins=["https://a.example", " https://b.example/"])
    path = f"/v1/conversations/{conversation_id}/ws"
    async with open_websocket(app, path, headers={"origin": "https://b.example"}):
        pass
    with pytest.raises(Refused):
        async with open_websocket(app, path, headers={"origin": "https://c.example"}):
            pass


async def test_an_unknown_conversation_is_refused(app: FastAPI) -> None:
    with pytest.raises(Refused) as refused:
        async with open_websocket(app, "/v1/conversations/nope/ws"):
            pass
    assert refused.value.status == 404
    assert refused.value.body["error"]["code"] == "not_found"


async def test_a_bad_query_is_refused_with_a_422(app: FastAPI, conversation_id: str) -> None:
    for query, expected in (("after_seq=-1", "after_seq"), ("deltas=maybe", "deltas")):
        with pytest.raises(Refused) as refused:
            async with open_websocket(app, f"/v1/conversations/{conversation_id}/ws?{query}"):
                pass
        assert refused.value.status == 422
        assert expected in refused.value.body["error"]["message"]


async def test_without_denial_responses_the_socket_is_closed_with_a_code(
    app: FastAPI, conversation_id: str
) -> None:
    async def bare(scope: Any, receive: Any, send: Any) -> None:
        scope = {**scope, "extensions": {}}
        await app(scope, receive, send)

    with pytest.raises(Refused) as refused:
        async with open_websocket(
            bare,
            f"/v1/conversations/{conversation_id}/ws",
            headers={"origin": "http://evil.example"},
        ):
            pass
    assert refused.value.code == 1008
    async with open_websocket(bare, "/v1/conversations/nope/ws") as socket:
        with pytest.raises(Closed) as closed:
            await socket.receive_json()
    assert closed.value.code == 4404


async def test_shutdown_closes_the_socket_after_a_closing_frame(
    app: FastAPI, runtime: Runtime, conversation_id: str
) -> None:
    async with open_websocket(app, f"/v1/conversations/{conversation_id}/ws") as socket:
        end_streams(app)
        frame = await socket.receive_json()
        assert frame["type"] == "error" and frame["code"] == "closing"
        with pytest.raises(Closed) as closed:
            await socket.receive_json()
    assert closed.value.code == 1001
    await eventually(lambda: _unwatched(runtime, conversation_id))


async def _unwatched(runtime: Runtime, cid: str) -> bool:
    return runtime.bus.subscriber_count(cid) == 0


async def test_a_user_row_read_back_from_the_store_echoes_its_client_message_id(
    app: FastAPI, client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    """A stream that catches up from the store (``after_seq``, or a gap in its frames)
    sends the user row's ``message`` frame with the ``client_message_id`` it was sent
    with, as the live frame has it: a client matching its own message finds it."""
    model.add(text_step("Hi."))
    body = {"text": "hello", "client_message_id": "c-1"}
    response = await client.post(f"/v1/conversations/{conversation_id}/turns", json=body)
    assert response.status_code == 200
    async with open_websocket(app, f"/v1/conversations/{conversation_id}/ws?after_seq=0") as ws:
        replayed = await ws.receive_json()
    assert replayed["type"] == "message" and replayed["message"]["role"] == "user"
    assert replayed["client_message_id"] == "c-1"


async def test_a_stream_that_breaks_says_so_and_closes_with_1011(
    app: FastAPI,
    client: httpx.AsyncClient,
    runtime: Runtime,
    model: ScriptedModel,
    conversation_id: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The store failing under a socket's frames (here, its catch-up read) is logged, sent
    as an ``error`` frame and the socket closed with 1011: before, the socket stayed open
    and silent, and nothing was logged."""
    model.add(text_step("Hi."))
    await _turn(client, conversation_id, "hello")

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise StoreError("sqlite: disk I/O error")

    monkeypatch.setattr(runtime.store, "list_messages", broken)
    async with open_websocket(app, f"/v1/conversations/{conversation_id}/ws?after_seq=0") as ws:
        frame = await ws.receive_json()
        assert frame["type"] == "error" and frame["code"] == "store_error"
        assert "disk I/O error" in frame["message"]
        with pytest.raises(Closed) as closed:
            await ws.receive_json()
    assert closed.value.code == 1011
    assert "a WebSocket's frames broke" in caplog.text
