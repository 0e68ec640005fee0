"""``GET /metrics``: Prometheus metrics (``observe.prometheus``), served when the setting
``observability.metrics`` is on; with ``observability.metrics_token`` set, only to a
request bearing it (``Authorization: Bearer <token>``; 401 otherwise). Not in the
OpenAPI document: it is for the scraper, not the API's clients. What it serves is the
app's ``state.metrics`` (a ``MetricsEndpoint``, set by ``ostinato serve``; ``None``: 404)."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import APIRouter, Request, Response

from ostinato.server.errors import error_response

router = APIRouter()


@dataclass(frozen=True, slots=True)
class MetricsEndpoint:
    """Where ``/metrics`` reads its text from, and the token it asks for (if any)."""

    source: Callable[[], bytes]
    content_type: str
    token: str | None = None


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    endpoint: MetricsEndpoint | None = getattr(request.app.state, "metrics", None)
    if endpoint is None:
        return error_response(404, "not_found", "metrics are off (observability.metrics)")
    if endpoint.token is None and not request.app.state.ostinato.auth.open:
        return error_response(401, "unauthorized", "metrics need a metrics token here")
    if endpoint.token is not None:
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            value.strip().encode(), endpoint.token.encode()
        ):
            refused = error_response(401, "unauthorized", "this needs the metrics token")
            refused.headers["WWW-Authenticate"] = "Bearer"
            return refused
    return Response(endpoint.source(), media_type=endpoint.content_type)
