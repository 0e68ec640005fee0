"""Loading an OpenAPI document (JSON or YAML, from a file or a URL) and finding the base
URL its calls go to. YAML is parsed (and its library imported) only for a document that
is not JSON."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from pathlib import Path

import httpx

from ostinato.messages import JSON
from ostinato.tools.schema import ToolSourceError

TIMEOUT = 30.0


async def load_openapi(source: str | Path, *, client: httpx.AsyncClient | None = None) -> JSON:
    """Read a document (JSON or YAML) from a file path or an http(s) URL.

    Fetched from a URL, a relative (or absent) ``servers`` URL is made absolute against
    the document's own URL, as the specification says.
    """
    text_source = str(source)
    if text_source.startswith(("http://", "https://")):
        if client is None:
            async with httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=True) as own:
                response = await own.get(text_source)
        else:
            response = await client.get(text_source)
        if response.status_code >= 400:
            raise ToolSourceError(f"{text_source}: HTTP {response.status_code}")
        document = parse_document(response.text, where=text_source)
        _absolute_servers(document, str(response.url))
        return document
    path = Path(source)
    try:
        text = await asyncio.to_thread(path.read_text, encoding="utf-8")
    except OSError as exc:
        raise ToolSourceError(f"{path}: {exc.strerror or exc}") from None
    return parse_document(text, where=str(path))


def parse_document(text: str, *, where: str = "OpenAPI document") -> JSON:
    if text.lstrip().startswith("{"):
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ToolSourceError(f"{where}: not JSON or YAML: {exc}") from None
    else:
        import yaml

        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ToolSourceError(f"{where}: not JSON or YAML: {exc}") from None
    if not isinstance(document, dict):
        raise ToolSourceError(f"{where}: an OpenAPI document is an object")
    return document


def _absolute_servers(document: JSON, document_url: str) -> None:
    servers = document.get("servers") or [{"url": "/"}]
    for server in servers:
        if isinstance(server, dict) and isinstance(server.get("url"), str):
            server["url"] = urllib.parse.urljoin(document_url, server["url"])
    document["servers"] = servers


def server_url(document: JSON, base_url: str | None) -> str:
    """The base URL calls go to: ``base_url``, else the document's first server (its
    variables at their defaults); it must be absolute."""
    if base_url is None:
        servers = document.get("servers") or []
        if servers and isinstance(servers[0], dict) and isinstance(servers[0].get("url"), str):
            base_url = servers[0]["url"]
            for var, spec in (servers[0].get("variables") or {}).items():
                base_url = base_url.replace("{" + var + "}", str(spec.get("default", "")))
    if not base_url or not base_url.startswith(("http://", "https://")):
        raise ToolSourceError(
            "OpenAPI: no absolute base URL (give base_url, or load the document from its URL)"
        )
    return base_url.rstrip("/")
