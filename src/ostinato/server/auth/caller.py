"""``Caller``: who sent a request, as the routes see it, and the dependency that gives
it to them. The middleware (``auth.middleware``) resolves it once per request, before
the route runs; routes only read it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal

from fastapi import Depends
from starlette.requests import HTTPConnection

from ostinato.errors import ClientError
from ostinato.identity.owners import LOCAL_OWNER
from ostinato.store.base import Conversation

Method = Literal["local", "key", "oidc", "anonymous"]
SCOPE_KEY = "ostinato.caller"  # where the middleware leaves the caller in the ASGI scope


@dataclass(frozen=True, slots=True)
class Caller:
    """The owner a request acts for, and how that was established.

    ``credential`` names what proved it (a key's id; never a secret), ``expires_at`` when
    that proof ends (a key's expiry, a token's ``exp``), ``via_cookie`` whether it rode a
    cookie (state-changing requests then need the CSRF header).
    """

    owner: str
    method: Method
    credential: str | None = None
    expires_at: datetime | None = None
    via_cookie: bool = False

    @property
    def sees_everything(self) -> bool:
        """The local owner of mode ``none`` is the only person: every conversation in the
        database is theirs, whoever made it."""
        return self.method == "local"

    def owns(self, conversation: Conversation) -> bool:
        return self.sees_everything or conversation.owner == self.owner


LOCAL = Caller(LOCAL_OWNER, "local")


class SignInRequired(ClientError):
    status = 401
    code = "unauthorized"


def caller_of(request: object) -> Caller | None:
    """The caller the middleware left on ``request`` (anything with an ASGI ``scope``:
    a Starlette request, the request an MCP handler's context carries); None if none."""
    found = getattr(request, "scope", {}).get(SCOPE_KEY)
    return found if isinstance(found, Caller) else None


def required_caller(request: object) -> Caller:
    """``caller_of``, for code that cannot act for no one: ``PermissionError`` if none."""
    found = caller_of(request)
    if found is None:
        raise PermissionError("this request has no caller")
    return found


def signed_in(connection: HTTPConnection) -> Caller:
    """The caller the middleware resolved for this request (401 if none was: a route
    on a public path cannot act for anyone)."""
    found = connection.scope.get(SCOPE_KEY)
    if not isinstance(found, Caller):
        raise SignInRequired("sign in to use this route")
    return found


async def current_caller(connection: HTTPConnection) -> Caller:
    """``signed_in``, as a dependency."""
    return signed_in(connection)


CurrentCaller = Annotated[Caller, Depends(current_caller)]
