"""Attachments over HTTP: a multipart form on the turns endpoint."""

from __future__ import annotations

import httpx

from ostinato.attachments import MAX_FILE_BYTES
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime


async def test_files_ride_a_multipart_turn_and_are_read_before_the_first_call(
    client: httpx.AsyncClient, conversation_id: str, model: ScriptedModel, runtime: Runtime
) -> None:
    model.add(text_step("I read them."))
    response = await client.post(
        f"/v1/conversations/{conversation_id}/turns",
        data={"text": "what do these say?", "client_message_id": "m1"},
        files=[
            ("files", ("notes.md", b"# Plan\nship on Friday", "text/markdown")),
            ("files", ("pixel.png", b"\x89PNG\r\n", "image/png")),
        ],
    )
    assert response.status_code == 200, response.text
    assert response.json()["stop_reason"] == "end_turn"
    rows = await runtime.store.list_messages(conversation_id)
    user = rows[0]
    assert [b.type for b in user.blocks] == ["text", "file", "image"]
    assert user.metadata["client_message_id"] == "m1"
    reads = [r.text for m in rows if m.hidden for r in m.tool_results]
    assert reads == ["# Plan\nship on Friday"]
    first = model.requests[0]
    assert "[attached: notes.md" in first.messages[0].text
    assert first.messages[-1].tool_results[0].text.startswith("# Plan")


async def test_caps_and_bad_parts_are_clear_errors(
    client: httpx.AsyncClient, conversation_id: str, runtime: Runtime
) -> None:
    url = f"/v1/conversations/{conversation_id}/turns"
    big = b"x" * (MAX_FILE_BYTES + 1)
    too_big = await client.post(
        url, data={"text": "hi"}, files=[("files", ("a.txt", big, "text/plain"))]
    )
    assert too_big.status_code == 413
    assert too_big.json()["error"]["code"] == "attachment_too_large"
    exe = await client.post(
        url, data={"text": "hi"}, files=[("files", ("a.exe", b"MZ", "application/x-msdownload"))]
    )
    assert exe.status_code == 422 and "attachments may be" in exe.json()["error"]["message"]
    odd = await client.post(
        url, data={"text": "hi", "colour": "red"}, files=[("files", ("a.txt", b"x", "text/plain"))]
    )
    assert odd.status_code == 422 and "colour" in odd.json()["error"]["message"]
    wrong_part = await client.post(
        url, data={"text": "hi"}, files=[("doc", ("a.txt", b"x", "text/plain"))]
    )
    assert wrong_part.status_code == 422
    assert await runtime.store.list_messages(conversation_id) == []  # nothing half-accepted


async def test_a_nul_character_in_a_stored_name_is_a_clear_422(
    client: httpx.AsyncClient, conversation_id: str
) -> None:
    # PostgreSQL cannot store NUL in a text column: refused at the door, never a 500
    title = await client.post("/v1/conversations", json={"title": "a\u0000b"})
    assert title.status_code == 422 and "NUL" in title.json()["error"]["message"]
    turn = await client.post(
        f"/v1/conversations/{conversation_id}/turns",
        json={"text": "hi", "client_message_id": "x\u0000"},
    )
    assert turn.status_code == 422 and "client_message_id" in turn.json()["error"]["message"]
