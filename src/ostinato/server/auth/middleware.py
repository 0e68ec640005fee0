"""``AuthMiddleware``: every HTTP request and WebSocket is resolved to a caller before
anything else runs (routing, body reading, uploads), in this one place.

In order, for each request:

1. ``hosts`` (when set): the ``Host`` header must name one of them. A server of mode
   ``none`` on a loopback address answers only to loopback names, so a web page that
   rebinds its own name to 127.0.0.1 cannot read it.
2. a state-changing request (POST, PUT, PATCH, DELETE) that a browser sent from another
   site (an ``Origin`` that is neither this server nor an allowed origin): 403.
3. public paths (health, the API's own docs, the chat page's files) pass without a caller.
4. the ``Authenticator`` resolves the caller (401 when it cannot); the caller goes into
   the ASGI scope, where ``CurrentCaller`` reads it.
5. a state-changing request that rode a cookie must carry the CSRF header: 403 if not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket

from ostinato.errors import Unavailable
from ostinato.identity.limits import LimitExceeded
from ostinato.server.auth.authenticator import Authenticator, Resolution, Unauthorized
from ostinato.server.auth.caller import SCOPE_KEY
from ostinato.server.auth.cookies import CSRF_HEADER
from ostinato.server.auth.failures import KeysUnavailable
from ostinato.server.errors import error_response, log

PUBLIC_PATHS = frozenset(
    {"/healthz", "/livez", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc", "/"}
    | {"/signin/callback", "/v1/session"}  # signing in: there is no caller yet
    | {"/metrics"}  # the scraper's: guarded by observability.metrics_token
)
PUBLIC_PREFIXES = ("/c/", "/assets/")  # the chat page: it holds no data, the API decides


AGENT_CARD = "/.well-known/agent-card.json"  # A2A's discovery: before any credential


def is_public(path: str) -> bool:
    """Paths that answer without a caller: health, the API's docs, the chat page and
    signing in on it, and the A2A agent cards (``/.well-known/agent-card.json``, and
    ``/a2a/<agent>/.well-known/agent-card.json``)."""
    if path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES) or path == AGENT_CARD:
        return True
    return path.startswith("/a2a/") and path.endswith(AGENT_CARD) and path.count("/") == 4


UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})


def same_site(origin: str | None, host: str | None, allowed: Iterable[str]) -> bool:
    """No ``Origin`` (not a browser page), this server's own origin (``Host``), or an
    allowed one (``*``: any)."""
    if origin is None:
        return True
    origin = origin.strip().rstrip("/").lower()
    allowed = set(allowed)
    if origin in allowed or "*" in allowed:
        return True
    return host is not None and urlsplit(origin).netloc == host.strip().lower()


class AuthMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        authenticator: Authenticator,
        allowed_origins: Iterable[str] = (),
        hosts: Iterable[str] | None = None,
        public: Callable[[str], bool] = is_public,
    ) -> None:
        self.app = app
        self.authenticator = authenticator
        self.allowed_origins = frozenset(allowed_origins)
        self.hosts = frozenset(h.lower() for h in hosts) if hosts is not None else None
        self.public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        connection = HTTPConnection(scope)
        method = scope.get("method", "GET") if scope["type"] == "http" else "GET"
        refusal = self._refusal(connection, method)
        if refusal is not None:
            await _refuse(scope, receive, send, *refusal)
            return
        if self.public(scope["path"]):
            await self.app(scope, receive, send)
            return
        resolution = await self._resolve(connection)
        if not isinstance(resolution, Resolution):
            await _refuse(scope, receive, send, *resolution)
            return
        caller = resolution.caller
        if caller.via_cookie and method in UNSAFE:
            cookies = self.authenticator.cookies
            if not cookies.csrf_ok(caller.owner, connection.headers.get(CSRF_HEADER)):
                message = (
                    "this request rides a cookie: send the X-CSRF-Token header "
                    "(its value is in GET /v1/caller)"
                )
                await _refuse(scope, receive, send, 403, "csrf_failed", message)
                return
        scope[SCOPE_KEY] = caller
        if not resolution.headers or scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *resolution.headers]}
            await send(message)

        await self.app(scope, receive, send_with_headers)

    async def _resolve(
        self, connection: HTTPConnection
    ) -> Resolution | tuple[int, str, str, list[tuple[bytes, bytes]]]:
        """The caller, or the refusal to answer with (status, code, message, headers)."""
        try:
            return await self.authenticator.resolve(connection)
        except Unauthorized as exc:
            return 401, "unauthorized", exc.message, exc.headers
        except LimitExceeded as exc:
            return 429, exc.code, exc.message, [(b"retry-after", str(exc.retry_after).encode())]
        except KeysUnavailable as exc:
            log.warning("refused a request: %s", exc)
            return 503, "unavailable", str(exc), []
        except Unavailable as exc:  # e.g. no database connection came free (StoreBusy)
            retry = str(max(1, round(exc.retry_after or 1))).encode()
            return 503, exc.code, exc.message, [(b"retry-after", retry)]

    def _refusal(self, connection: HTTPConnection, method: str) -> tuple[int, str, str] | None:
        host, origin = _host_and_origin(connection.scope)
        if self.hosts is not None and _hostname(host) not in self.hosts:
            return 403, "forbidden", "this server does not answer to that Host name"
        if method in UNSAFE and not same_site(origin, host, self.allowed_origins):
            return 403, "forbidden", "requests from this Origin are not allowed"
        return None


def _host_and_origin(scope: Scope) -> tuple[str | None, str | None]:
    """The request's first ``Host`` and ``Origin`` headers, in one pass over the raw ones
    (as Starlette's ``Headers`` reads them: latin-1, the first of each)."""
    host = origin = None
    for name, value in scope.get("headers", ()):
        if name == b"host" and host is None:
            host = value.decode("latin-1")
        elif name == b"origin" and origin is None:
            origin = value.decode("latin-1")
    return host, origin


def _hostname(host: str | None) -> str:
    if host is None:
        return ""
    host = host.strip().lower()
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


async def _refuse(
    scope: Scope,
    receive: Receive,
    send: Send,
    status: int,
    code: str,
    message: str,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    response = error_response(status, code, message)
    response.raw_headers.extend(headers or [])
    if status == 401:
        response.headers["www-authenticate"] = "Bearer"
    if scope["type"] == "http":
        await response(scope, receive, send)
        return
    websocket = WebSocket(scope, receive, send)
    if "websocket.http.response" in scope.get("extensions", {}):
        await websocket.send_denial_response(response)
    else:
        await websocket.close(code=1008, reason=message[:120])


def install_identity(
    app: Starlette,
    authenticator: Authenticator,
    allowed_origins: Iterable[str],
    hosts: Iterable[str] | None,
) -> None:
    """Add the middleware that resolves callers and, when origins are allowed, CORS
    outside it (a preflight carries no credentials). Call it after every other
    middleware: the caller is then known before any body is read."""
    app.add_middleware(
        AuthMiddleware, authenticator=authenticator, allowed_origins=allowed_origins, hosts=hosts
    )
    if allowed_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=sorted(allowed_origins),
            # "*" lets any site call with a bearer credential, never with the caller's
            # cookies (Starlette would echo the site's origin beside credentials).
            allow_credentials="*" not in allowed_origins,
            allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=["authorization", "content-type", "last-event-id", "x-csrf-token"],
            expose_headers=["retry-after", "x-ostinato-anonymous-token"],
        )
