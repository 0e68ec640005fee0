"""Attachments: files a user sends with a message.

A file is stored in the user's message as an ``image`` or ``file`` block (base64 data).
Images go to the model as they are. Text, Markdown, JSON, CSV and PDF files are read into
text by the ``read_attachment`` tool (``ostinato.tools.builtins``), which runs as a
turn-zero seed (one call per file, in parallel, before the first model call), so the
model gets their text as a tool result instead of the raw bytes. Sizes are capped; a file
over a cap is refused with 413.
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import json
import mimetypes
from pathlib import Path

from ostinato.bounded import in_process, off_loop
from ostinato.errors import ClientError, InvalidRequest, ToolError
from ostinato.messages import Block, FileBlock, ImageBlock, Message, TextBlock

MAX_FILE_BYTES = 10 * 2**20
MAX_TOTAL_BYTES = 25 * 2**20
MAX_FILES = 10
MAX_TEXT_CHARS = 200_000  # of extracted text handed to the model
PDF_SECONDS = 30.0  # reading one PDF (a child process, killed when they are spent)
PDF_MEMORY = 512 * 2**20  # of address space for that process
TEXT_SECONDS = 10.0  # reading any other file (JSON, CSV, text)
_PDF_WORKER = str(Path(__file__).with_name("bounded") / "pdf_worker.py")

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
TEXT_TYPES = frozenset(
    {"text/plain", "text/markdown", "text/x-markdown", "text/csv", "application/json"}
)
PDF = "application/pdf"
EXTRA_TYPES = {".md": "text/markdown", ".markdown": "text/markdown", ".csv": "text/csv"}
CONTEXT_KEY = "attachments"  # where a turn's files sit in ``ToolContext.extras``


class AttachmentTooLarge(ClientError):
    status = 413
    code = "attachment_too_large"


def media_type_of(name: str, declared: str | None) -> str:
    """The declared type unless it is missing or generic; else guessed from the name."""
    declared = (declared or "").split(";")[0].strip().lower()
    if declared and declared != "application/octet-stream":
        return declared
    suffix = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return EXTRA_TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def attachment_block(name: str, media_type: str | None, data: bytes) -> ImageBlock | FileBlock:
    """A block for one uploaded file; raises ``AttachmentTooLarge`` or ``InvalidRequest``."""
    if len(data) > MAX_FILE_BYTES:
        raise AttachmentTooLarge(
            f"{name!r} is {len(data)} bytes; a file may be at most {MAX_FILE_BYTES} bytes"
        )
    kind = media_type_of(name, media_type)
    encoded = base64.b64encode(data).decode("ascii")
    if kind in IMAGE_TYPES:
        return ImageBlock(kind, data=encoded)
    if kind in TEXT_TYPES or kind == PDF or kind.startswith("text/"):
        return FileBlock(kind, data=encoded, name=name)
    raise InvalidRequest(
        f"{name!r} is {kind}; attachments may be images (png, jpeg, gif, webp), text, "
        "Markdown, JSON, CSV or PDF"
    )


def check_total(blocks: list[ImageBlock | FileBlock]) -> None:
    if len(blocks) > MAX_FILES:
        raise AttachmentTooLarge(f"{len(blocks)} files; a message may carry at most {MAX_FILES}")
    total = sum(decoded_size(b.data) for b in blocks)
    if total > MAX_TOTAL_BYTES:
        raise AttachmentTooLarge(
            f"the files add up to {total} bytes; a message may carry at most {MAX_TOTAL_BYTES}"
        )


def decoded_size(data: str | None) -> int:
    """The byte size of base64 ``data`` without decoding it."""
    if not data:
        return 0
    return len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))


def files_of(message: Message) -> dict[str, FileBlock]:
    """The message's files that have text to extract, by a name unique in the message."""
    out: dict[str, FileBlock] = {}
    for index, block in enumerate(message.blocks):
        if isinstance(block, FileBlock) and block.data is not None:
            name = block.name or f"file-{index + 1}"
            out[name if name not in out else f"{index + 1}-{name}"] = block
    return out


async def extract_text(block: FileBlock) -> str:
    """The text of a text, Markdown, JSON, CSV or PDF file. Reading it is work whose cost
    the sender chooses, so none of it runs on the event loop: a PDF is read in a child
    process killed after ``PDF_SECONDS`` (``ostinato.bounded.in_process``), the other
    kinds in the bounded threads (``ostinato.bounded.off_loop``)."""
    try:
        data = base64.b64decode(block.data or "", validate=True)
    except binascii.Error:
        raise ToolError("the attachment's data is not valid base64") from None
    try:
        if block.media_type == PDF:
            text = await _pdf_text(data)
        else:
            text = await off_loop(
                _plain_text, data, block.media_type, seconds=TEXT_SECONDS, what="the file"
            )
    except InvalidRequest as exc:  # over its budget
        raise ToolError(exc.message) from None
    if len(text) > MAX_TEXT_CHARS:
        text = text[:MAX_TEXT_CHARS] + f"\n[… cut at {MAX_TEXT_CHARS} characters]"
    return text


def _plain_text(data: bytes, media_type: str) -> str:
    text = data.decode("utf-8", errors="replace")
    if media_type == "application/json":
        return _json_text(text)
    if media_type == "text/csv":
        return _csv_text(text)
    return text


def placeholder(message: Message) -> Message:
    """The message as a request carries it: each file replaced by a line naming it (its
    text arrives through ``read_attachment``). Images stay."""
    if message.role != "user" or not any(type(b) is FileBlock for b in message.blocks):
        return message  # only user messages carry files
    blocks: list[Block] = []
    for block in message.blocks:
        if isinstance(block, FileBlock):
            size = decoded_size(block.data)
            label = block.name or block.url or "file"
            blocks.append(TextBlock(f"[attached: {label} ({block.media_type}, {size} bytes)]"))
        else:
            blocks.append(block)
    return Message(
        message.role,
        tuple(blocks),
        message.hidden,
        message.metadata,
        message.seq,
        message.id,
        message.turn_id,
        message.created_at,
        message.parent_seq,
    )


async def _pdf_text(data: bytes) -> str:
    answer = await in_process(
        _PDF_WORKER, data, seconds=PDF_SECONDS, memory_bytes=PDF_MEMORY, what="the PDF"
    )
    if not isinstance(answer, dict) or "pages" not in answer:
        error = answer.get("error") if isinstance(answer, dict) else None
        raise ToolError(f"the PDF could not be read: {error or 'no answer'}")
    pages = [str(text) for text in answer["pages"]]
    return "\n\n".join(f"[page {i + 1}]\n{text}" for i, text in enumerate(pages))


def _json_text(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text  # not valid JSON: the raw text is still useful


def _csv_text(text: str) -> str:
    rows = list(csv.reader(io.StringIO(text)))
    return "\n".join(" | ".join(cell.strip() for cell in row) for row in rows)
