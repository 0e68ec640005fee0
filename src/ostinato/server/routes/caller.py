"""``GET /v1/caller``: who the server takes the caller for, and the CSRF token a page
riding a cookie sends back with its state-changing requests."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from ostinato.server.auth import CurrentCaller
from ostinato.server.context import Context

router = APIRouter(prefix="/v1", tags=["service"])


class CallerOut(BaseModel):
    owner: str = Field(description="The owner every request of this caller acts for.")
    method: Literal["local", "key", "oidc", "anonymous"] = Field(
        description="How the caller was established."
    )
    anonymous: bool
    csrf_token: str | None = Field(
        description="For a caller whose requests ride a cookie: send it as `X-CSRF-Token` "
        "with every POST, PUT, PATCH and DELETE."
    )


@router.get("/caller", response_model=CallerOut)
async def who_am_i(context: Context, caller: CurrentCaller) -> CallerOut:
    """The caller as this request was resolved (see docs/auth.md)."""
    cookie_based = caller.via_cookie or caller.method == "anonymous"  # a session or anonymous
    return CallerOut(
        owner=caller.owner,
        method=caller.method,
        anonymous=caller.method == "anonymous",
        csrf_token=context.auth.cookies.csrf_token(caller.owner) if cookie_based else None,
    )
