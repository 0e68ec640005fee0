"""``RequestOwner``: whose things a route acts on (memory graphs, forged tools, MCP
servers): the caller's owner, as ``server.auth`` resolved it for this request. One
dependency, so every route of this kind answers for the same owner; another owner's
thing is answered like a missing one (404). ``AccountOwner``: the same, for what an
anonymous caller may not do (403 ``account_required``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends

from ostinato.errors import ClientError
from ostinato.identity.owners import is_anonymous
from ostinato.server.auth import CurrentCaller
from ostinato.server.schemas import ErrorBody


async def request_owner(caller: CurrentCaller) -> str:
    return caller.owner


RequestOwner = Annotated[str, Depends(request_owner)]


class AccountRequired(ClientError):
    """An anonymous caller asked for what needs an account."""

    status = 403
    code = "account_required"


async def account_owner(caller: CurrentCaller) -> str:
    """The caller's owner, if it has an account: an anonymous caller may not forge tools
    or connect MCP servers (their trial runs and connections reach the network)."""
    if is_anonymous(caller.owner):
        raise AccountRequired("sign in to do this: anonymous callers cannot")
    return caller.owner


AccountOwner = Annotated[str, Depends(account_owner)]
ACCOUNT_REQUIRED: dict[int | str, dict[str, Any]] = {
    403: {"model": ErrorBody, "description": "Anonymous callers cannot (`account_required`)."}
}
