"""Reading a turn request: a JSON body, or a multipart form carrying files.

The multipart form has the same fields as the JSON body (``text``, ``client_message_id``,
``policy``, ``cancel_on_disconnect``) plus any number of ``files`` parts. Each file
becomes an image or file block of the user's message (``ostinato.attachments``); a file
over the size cap gets 413, an unsupported type 422, with the usual error body.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException

from ostinato.attachments import (
    MAX_FILE_BYTES,
    MAX_FILES,
    attachment_block,
    check_total,
)
from ostinato.errors import InvalidRequest
from ostinato.messages import FileBlock, ImageBlock
from ostinato.server.schemas import TurnRequest

FORM_FIELDS = ("text", "client_message_id", "policy", "cancel_on_disconnect")


async def read_turn_request(request: Request) -> tuple[TurnRequest, list[ImageBlock | FileBlock]]:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "multipart/form-data":
        return await _read_form(request)
    if kind != "application/json":
        raise InvalidRequest(
            "send the turn as a JSON object with Content-Type: application/json, or as a "
            "multipart form (multipart/form-data) with files"
        )
    raw = await request.body()
    if not raw.strip():
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "required"}])
    try:
        return TurnRequest.model_validate_json(raw), []
    except ValidationError as exc:
        raise RequestValidationError(_located(exc, "body")) from None


async def _read_form(request: Request) -> tuple[TurnRequest, list[ImageBlock | FileBlock]]:
    # The whole body is bounded before this by the upload limit (``server.limits``).
    try:
        form = await request.form(max_files=MAX_FILES + 1, max_fields=len(FORM_FIELDS) + 4)
    except HTTPException as exc:
        if exc.status_code != 400:
            raise
        raise InvalidRequest(f"the multipart form cannot be read: {exc.detail}") from None
    fields: dict[str, Any] = {}
    files: list[UploadFile] = []
    for name, value in form.multi_items():
        if isinstance(value, UploadFile):
            if name not in ("files", "file"):
                raise InvalidRequest(f"a file must be sent as a 'files' part, not {name!r}")
            files.append(value)
        elif name in FORM_FIELDS:
            fields[name] = _FLAGS.get(value.lower(), value) if name in _BOOLEAN else value
        else:
            raise InvalidRequest(f"unknown form field {name!r} (fields: {', '.join(FORM_FIELDS)})")
    if len(files) > MAX_FILES:
        raise InvalidRequest(f"{len(files)} files; a message may carry at most {MAX_FILES}")
    if not fields.get("text", "").strip() and files:
        fields["text"] = "(files attached)"
    try:
        body = TurnRequest.model_validate_json(json.dumps(fields))
    except ValidationError as exc:
        raise RequestValidationError(_located(exc, "form")) from None
    blocks = [
        attachment_block(f.filename or "file", f.content_type, await f.read(MAX_FILE_BYTES + 1))
        for f in files
    ]
    check_total(blocks)
    return body, blocks


_BOOLEAN = frozenset({"cancel_on_disconnect"})
_FLAGS = {"true": True, "false": False}  # as JSON spells them; else refused as not a bool


def _located(exc: ValidationError, where: str) -> list[Any]:
    return [{**error, "loc": (where, *error["loc"])} for error in exc.errors()]
