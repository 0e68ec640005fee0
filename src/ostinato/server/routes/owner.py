"""``RequestOwner``: whose things a route acts on (memory graphs, forged tools, MCP
servers): the caller's owner, as ``server.auth`` resolved it for this request. One
dependency, so every route of this kind answers for the same owner; another owner's
thing is answered like a missing one (404)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from ostinato.server.auth import CurrentCaller


async def request_owner(caller: CurrentCaller) -> str:
    return caller.owner


RequestOwner = Annotated[str, Depends(request_owner)]
