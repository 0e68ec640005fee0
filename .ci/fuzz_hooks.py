"""Schemathesis hooks for .ci/fuzz-api (loaded through SCHEMATHESIS_HOOKS).

An idempotency key (the ``Idempotency-Key`` header, a turn's ``client_message_id``)
stands for one request: sent again with another body it is refused with a 422 by design
(docs/api.md, Retries). Schemathesis draws these values independently for each case, so
two different cases may share one, which the schema cannot rule out. Each case gets a
key of its own (a counter: the run stays deterministic); the keyed path is still taken.
"""

from __future__ import annotations

import itertools
from typing import Any

import schemathesis

_numbers = itertools.count(1)


def _fresh(value: Any) -> str:
    return f"fuzz-{next(_numbers)}-{str(value)[:20]}"


@schemathesis.hook
def map_headers(ctx: Any, headers: dict[str, Any] | None) -> dict[str, Any] | None:
    if headers:
        for name in list(headers):
            if name.lower() == "idempotency-key":
                headers[name] = _fresh("")
    return headers


@schemathesis.hook
def map_body(ctx: Any, body: Any) -> Any:
    if isinstance(body, dict) and isinstance(body.get("client_message_id"), str):
        body["client_message_id"] = _fresh(body["client_message_id"])
    return body
