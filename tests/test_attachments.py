"""Attachments: blocks, caps, extraction, and turn-zero seeds that read them."""

from __future__ import annotations

import base64
import json

import pytest

from ostinato.attachments import (
    MAX_FILE_BYTES,
    AttachmentTooLarge,
    attachment_block,
    check_total,
    extract_text,
    placeholder,
)
from ostinato.errors import InvalidRequest
from ostinato.messages import FileBlock, ImageBlock, Message, TextBlock
from ostinato.models.scripted import text_step, tool_step
from ostinato.store.base import FinishToolCall, WriteOp
from ostinato.store.sql.wal_sync import acknowledges
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.functions import function_tool
from ostinato.tools.registry import ToolRegistry
from tests.loop.harness import Harness


def tiny_pdf(text: str) -> bytes:
    """A one-page PDF showing ``text``, written by hand (objects, then the xref table)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def test_blocks_by_type() -> None:
    assert isinstance(attachment_block("a.png", "image/png", b"\x89PNG"), ImageBlock)
    md = attachment_block("notes.md", None, b"# Title")
    assert isinstance(md, FileBlock) and md.media_type == "text/markdown" and md.name == "notes.md"
    assert attachment_block("x.csv", "application/octet-stream", b"a,b").media_type == "text/csv"
    with pytest.raises(InvalidRequest, match="attachments may be"):
        attachment_block("a.exe", "application/x-msdownload", b"MZ")


def test_caps_are_413() -> None:
    with pytest.raises(AttachmentTooLarge) as error:
        attachment_block("big.txt", "text/plain", b"x" * (MAX_FILE_BYTES + 1))
    assert error.value.status == 413
    blocks = [attachment_block(f"{i}.txt", "text/plain", b"x") for i in range(11)]
    with pytest.raises(AttachmentTooLarge, match="at most 10"):
        check_total(blocks)


async def test_extraction_of_each_kind() -> None:
    async def text(name: str, kind: str, data: bytes) -> str:
        block = attachment_block(name, kind, data)
        assert isinstance(block, FileBlock)
        return await extract_text(block)

    assert await text("a.txt", "text/plain", "héllo".encode()) == "héllo"
    assert json.loads(await text("a.json", "application/json", b'{"a":[1,2]}')) == {"a": [1, 2]}
    assert await text("a.csv", "text/csv", b"name,qty\napple, 3\n") == "name | qty\napple | 3"
    pdf = await text("r.pdf", "application/pdf", tiny_pdf("Quarterly figures"))
    assert "Quarterly figures" in pdf
    from ostinato.errors import ToolError

    with pytest.raises(ToolError, match="PDF could not be read"):
        await text("bad.pdf", "application/pdf", b"%PDF-1.4 garbage")


def test_requests_carry_a_line_instead_of_the_file() -> None:
    block = attachment_block("notes.md", None, b"# Title")
    message = Message("user", (TextBlock("see"), block))
    shown = placeholder(message)
    assert shown.blocks[0] == TextBlock("see")
    assert shown.blocks[1] == TextBlock("[attached: notes.md (text/markdown, 7 bytes)]")
    plain = Message("user", (TextBlock("x"),))
    assert placeholder(plain) is plain


async def test_turn_zero_seeds_read_files_and_recall_before_the_first_call() -> None:
    recalled: list[str] = []

    async def recall(query: str, limit: int = 10) -> str:
        """Search memory."""
        recalled.append(query)
        return "the user likes tea"

    tools = ToolRegistry([*builtin_tools(), function_tool(recall, category="read")])
    h = Harness(text_step("Read it."), tools=tools)
    cid = await h.conversation()
    files = (
        attachment_block("a.txt", "text/plain", b"alpha"),
        attachment_block("b.csv", "text/csv", b"x,y\n1,2"),
        attachment_block("p.png", "image/png", b"\x89PNG"),
    )
    message = Message("user", (TextBlock("summarise these"), *files))
    await h.runtime.run_turn(cid, message)
    assert recalled == ["summarise these"]
    rows = await h.messages(cid)
    assert [(m.role, m.hidden) for m in rows] == [
        ("user", False),
        ("assistant", True),
        ("tool", True),
        ("assistant", False),
    ]
    assert [u.name for u in rows[1].tool_uses] == ["recall", "read_attachment", "read_attachment"]
    assert [r.text for r in rows[2].tool_results] == ["the user likes tea", "alpha", "x | y\n1 | 2"]
    first = h.model.requests[0]
    user = first.messages[0]
    assert isinstance(user.blocks[3], ImageBlock)  # images go to the model as they are
    assert user.blocks[1] == TextBlock("[attached: a.txt (text/plain, 5 bytes)]")
    assert first.messages[-1].tool_results[1].text == "alpha"  # before the first call
    visible = await h.store.list_messages(cid, include_hidden=False)
    assert [m.role for m in visible] == ["user", "assistant"]
    assert base64.b64decode(files[0].data or "") == b"alpha"  # stored as sent


async def test_a_seed_s_result_acknowledges_nothing_and_a_model_s_call_does() -> None:
    """A turn-zero seed's read changed nothing: its record's end is not waited for on
    disk (``wal_sync``); the end of a call the model made is."""

    async def recall(query: str, limit: int = 10) -> str:
        """Search memory."""
        return "the user likes tea"

    async def note(text: str) -> str:
        """Write a note."""
        return "noted"

    tools = ToolRegistry(
        [*builtin_tools(), function_tool(recall, category="read"), function_tool(note)]
    )
    h = Harness(tool_step(("note", {"text": "tea"}, "n1")), text_step("Done."), tools=tools)
    cid = await h.conversation()
    written: list[tuple[WriteOp, ...]] = []
    write = h.store.write

    async def recording(*ops: WriteOp) -> list[object]:
        written.append(ops)
        return await write(*ops)

    h.store.write = recording  # type: ignore[method-assign]
    await h.runtime.run_turn(cid, "remember that I like tea")
    ends = [(ops, op) for ops in written for op in ops if isinstance(op, FinishToolCall)]
    seed = [(ops, op) for ops, op in ends if op.tool_call_id != "n1"]
    made = [(ops, op) for ops, op in ends if op.tool_call_id == "n1"]
    assert len(seed) == 1 and len(made) == 1
    assert not seed[0][1].side_effects and not acknowledges(seed[0][0])
    assert made[0][1].side_effects and acknowledges(made[0][0])
