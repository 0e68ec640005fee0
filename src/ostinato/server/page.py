"""The chat page: ``/``, ``/c/<id>`` and ``/signin/callback`` answer the page's HTML,
``/assets/<name>`` its script and styles, all from files inside the package
(``static/page/``, built from ``web/`` by ``npm run build`` and committed, so a fresh
install has nothing to build and the page needs no network).

Asset names carry a hash of their content, so they are cached for good; the HTML is
never cached, so a new build is picked up at the next load. Assets are sent gzipped to
clients that accept it (compressed once, on first use). The HTML carries a strict
Content-Security-Policy: only the page's own script runs, whatever a reply contains.
"""

from __future__ import annotations

import gzip
import re
from functools import cache
from pathlib import Path

from fastapi import APIRouter, Request, Response

from ostinato.errors import NotFound

PAGE_DIR = Path(__file__).with_name("static") / "page"
ASSET_NAME = re.compile(r"^[A-Za-z0-9_.-]+\.(js|css)$")
MEDIA_TYPES = {"js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8"}
CSP = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data: blob:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
NOT_BUILT = "the chat page is not built: run `npm ci && npm run build` in web/"

router = APIRouter(include_in_schema=False)


@cache
def _read(name: str) -> tuple[bytes, bytes]:
    """A file of the page, plain and gzipped."""
    data = (PAGE_DIR / name).read_bytes()
    return data, gzip.compress(data, compresslevel=9, mtime=0)


def _file(name: str, request: Request, media_type: str, cache_control: str) -> Response:
    try:
        plain, packed = _read(name)
    except FileNotFoundError:
        raise NotFound(NOT_BUILT if name == "index.html" else f"no asset named {name!r}") from None
    headers = {"Cache-Control": cache_control, "Vary": "Accept-Encoding"}
    if "gzip" in request.headers.get("accept-encoding", "").lower():
        headers["Content-Encoding"] = "gzip"
        return Response(packed, media_type=media_type, headers=headers)
    return Response(plain, media_type=media_type, headers=headers)


def _page(request: Request) -> Response:
    response = _file("index.html", request, "text/html; charset=utf-8", "no-cache")
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


@router.get("/")
async def home(request: Request) -> Response:
    """The chat page, on a new conversation."""
    return _page(request)


@router.get("/c/{conversation_id}")
async def conversation_page(request: Request, conversation_id: str) -> Response:
    """The chat page, on one conversation (the page reads it through the API, which
    decides who may see it; the HTML itself holds no data)."""
    return _page(request)


@router.get("/signin/callback")
async def signin_callback(request: Request) -> Response:
    """The chat page, where an identity provider sends the browser back after a sign-in
    (the page finishes it with ``POST /v1/session``)."""
    return _page(request)


@router.get("/assets/{name}")
async def asset(request: Request, name: str) -> Response:
    """The page's script and styles; their names carry a hash of their content."""
    match = ASSET_NAME.match(name)
    if match is None:
        raise NotFound(f"no asset named {name!r}")
    response = _file(
        name, request, MEDIA_TYPES[match.group(1)], "public, max-age=31536000, immutable"
    )
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response
