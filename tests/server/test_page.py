"""The chat page: ``/`` and ``/c/<id>`` answer its HTML from inside the package, with a
strict Content-Security-Policy; ``/assets/<name>`` its hashed script and styles, gzipped
for clients that accept it."""

from __future__ import annotations

import gzip
import re

import httpx
import pytest

from ostinato.server.page import PAGE_DIR


def _asset_names(html: str) -> list[str]:
    return re.findall(r'/assets/([A-Za-z0-9_.-]+)"', html)


@pytest.mark.parametrize("store", ["memory"], indirect=True)
@pytest.mark.parametrize("path", ["/", "/c/1a2299a8314fc406b9e768a4a93"])
async def test_the_page_is_served_with_a_strict_policy(
    client: httpx.AsyncClient, path: str
) -> None:
    response = await client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["cache-control"] == "no-cache"
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "frame-ancestors 'none'" in policy
    assert len(_asset_names(response.text)) == 2  # one script, one style sheet


@pytest.mark.parametrize("store", ["memory"], indirect=True)
async def test_assets_are_immutable_and_gzipped_when_accepted(client: httpx.AsyncClient) -> None:
    html = (await client.get("/")).text
    for name in _asset_names(html):
        plain = (PAGE_DIR / name).read_bytes()
        packed = await client.get(f"/assets/{name}", headers={"accept-encoding": "gzip"})
        assert packed.status_code == 200
        assert packed.headers["content-encoding"] == "gzip"
        assert "immutable" in packed.headers["cache-control"]
        assert packed.content == plain  # httpx decodes the gzip
        assert int(packed.headers["content-length"]) < len(plain)
        raw = await client.get(f"/assets/{name}", headers={"accept-encoding": "identity"})
        assert "content-encoding" not in raw.headers and raw.content == plain
        assert gzip.decompress(gzip.compress(plain)) == raw.content


@pytest.mark.parametrize("store", ["memory"], indirect=True)
@pytest.mark.parametrize("name", ["nope.js", "..%2Fapp.py", "index.html", "app.exe"])
async def test_unknown_assets_are_404_with_the_error_body(
    client: httpx.AsyncClient, name: str
) -> None:
    response = await client.get(f"/assets/{name}")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("store", ["memory"], indirect=True)
async def test_the_page_is_not_in_the_api_document(client: httpx.AsyncClient) -> None:
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert "/" not in paths and "/c/{conversation_id}" not in paths
