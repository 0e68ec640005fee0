"""The ``[requests]`` section: how large a request body may be, by kind
(``server.limits``; the defaults are
``BodyLimits``'), and how long an ``Idempotency-Key`` is kept (``server.idempotency``)."""

from __future__ import annotations

from pydantic import Field

from ostinato.attachments import MAX_TOTAL_BYTES
from ostinato.config.sections import Section

KIB, MIB = 1024, 1024 * 1024


class RequestsSection(Section):
    message_bytes: int = Field(
        default=1 * MIB,
        ge=1,
        description="The largest body of a turn sent as JSON, of a WebSocket message, and "
        "of every body not named below (a bigger one is a 413).",
    )
    metadata_bytes: int = Field(
        default=64 * KIB,
        ge=1,
        description="The largest body of `POST /v1/conversations` and of `PATCH` of one "
        "(title and metadata).",
    )
    upload_bytes: int = Field(
        default=MAX_TOTAL_BYTES + 256 * KIB,
        ge=1,
        description="The largest body of a turn sent as a multipart form with files.",
    )
    import_bytes: int = Field(
        default=100 * MIB,
        ge=1,
        description="The largest file `POST /v1/import` takes (an export, or ChatGPT's "
        "conversations.json).",
    )
    idempotency_window_s: float = Field(
        default=24 * 3600.0,
        gt=0,
        allow_inf_nan=False,
        description="How long a request's `Idempotency-Key` (or `client_message_id`) is "
        "kept: a retry within it gets the first request's answer (api.md, Retries).",
    )
