"""``RequestOwner``: whose things a route acts on (memory graphs, forged tools, MCP
servers). One dependency, so every route of this kind answers for the same owner.

Until requests carry an identity, the owner is named in the request (``owner``), as
``/v1/memories`` does; the identity work resolves the caller once per request, and this
dependency then becomes the caller's owner.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query

from ostinato.server.schemas import NO_NUL

OWNER_LIMIT = 200


def request_owner(
    owner: Annotated[
        str,
        Query(min_length=1, max_length=OWNER_LIMIT, pattern=NO_NUL, description="Whose."),
    ],
) -> str:
    return owner


RequestOwner = Annotated[str, Depends(request_owner)]
