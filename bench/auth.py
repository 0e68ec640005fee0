"""The added cost of resolving a caller on each request.

The whole identity middleware (``AuthMiddleware``: Host and Origin checks, the
authenticator, the caller put into the scope) runs in front of an ASGI app that answers
at once, so the figure is what identity adds to one request, not what HTTP costs. Each
mode against a SQLite store:

- ``none``: every caller is the local owner (the baseline);
- ``key (cached)``: an API key read from the store within ``key_cache_s`` (the common
  case: a client sends the same key on every request);
- ``key (store read)``: ``key_cache_s = 0``, so every request reads the key's row;
- ``JWT (cached)``: a token already checked once (its signature is not checked again);
- ``JWT (first sight)``: each request a new token (an RS256 signature check each).

Targets: under 50 us for a key, under 200 us for a cached JWT. Run:
``python bench/auth.py [--requests N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from ostinato.identity.keys import create_key
from ostinato.identity.settings import AuthSettings, OidcSettings
from ostinato.server.auth.authenticator import Authenticator
from ostinato.server.auth.middleware import AuthMiddleware
from ostinato.server.auth.oidc import OidcVerifier
from ostinato.store import open_store
from ostinato.store.base import Store


async def _answer(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def _sink(message: Any) -> None:
    return None


async def _receive() -> Any:
    return {"type": "http.request", "body": b"", "more_body": False}


def _scope(credential: str | None) -> dict[str, Any]:
    headers = [(b"host", b"127.0.0.1:8000")]
    if credential:
        headers.append((b"authorization", f"Bearer {credential}".encode()))
    return {
        "type": "http",
        "method": "GET",
        "path": "/v1/conversations",
        "headers": headers,
        "query_string": b"",
    }


async def per_request(app: AuthMiddleware, credentials: list[str | None]) -> float:
    """Median microseconds per request, over batches of the given credentials."""
    for credential in credentials[:50]:  # warm up
        await app(_scope(credential), _receive, _sink)
    samples = []
    batch = 200
    for start in range(0, len(credentials), batch):
        chunk = [_scope(c) for c in credentials[start : start + batch]]
        began = time.perf_counter()
        for scope in chunk:
            await app(scope, _receive, _sink)
        samples.append((time.perf_counter() - began) / len(chunk) * 1e6)
    return statistics.median(samples)


class _LocalIssuer(OidcVerifier):
    """A verifier whose keys are given, not fetched (no network in a benchmark)."""

    def __init__(self, settings: OidcSettings, key: rsa.RSAPrivateKey) -> None:
        super().__init__(settings)
        jwk = jwt.PyJWK.from_json(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        self._keys = {"k1": (jwk, "RS256")}
        self._fetched_at = time.monotonic()


def _tokens(key: rsa.RSAPrivateKey, count: int) -> list[str | None]:
    now = int(time.time())
    claims = {"iss": "https://issuer", "aud": "ostinato", "exp": now + 3600}
    return [
        jwt.encode({**claims, "sub": f"user{i}"}, key, "RS256", headers={"kid": "k1"})
        for i in range(count)
    ]


async def run(requests: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store: Store = await open_store(f"sqlite:///{Path(tmp) / 'auth.db'}")
        try:
            key = (await create_key(store, "ann", "bench"))[1]
            oidc = OidcSettings(issuer="https://issuer", audience=["ostinato"])
            private = rsa.generate_private_key(public_exponent=65537, key_size=2048)

            def app(settings: AuthSettings, verifier: OidcVerifier | None = None) -> AuthMiddleware:
                auth = Authenticator(settings, store, oidc=verifier)
                return AuthMiddleware(_answer, authenticator=auth)

            none = await per_request(app(AuthSettings()), [None] * requests)
            cached = await per_request(app(AuthSettings(mode="keys")), [key] * requests)
            uncached = await per_request(
                app(AuthSettings(mode="keys", key_cache_s=0)), [key] * requests
            )
            oidc_app = app(AuthSettings(mode="oidc", oidc=oidc), _LocalIssuer(oidc, private))
            token = _tokens(private, 1)
            jwt_cached = await per_request(oidc_app, token * requests)
            fresh = min(requests, 2_000)
            jwt_first = await per_request(oidc_app, _tokens(private, fresh + 50)[50:])
        finally:
            await store.close()
    print(f"resolving a caller, {requests:,} requests each (median per request, SQLite store):")
    print(f"  none (baseline)       {none:8.1f} us")
    print(
        f"  key (cached)          {cached:8.1f} us   added {cached - none:6.1f} us  (target < 50)"
    )
    print(f"  key (store read)      {uncached:8.1f} us   added {uncached - none:6.1f} us")
    print(
        f"  JWT (cached)          {jwt_cached:8.1f} us   added {jwt_cached - none:6.1f} us"
        "  (target < 200)"
    )
    print(f"  JWT (first sight)     {jwt_first:8.1f} us   added {jwt_first - none:6.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=10_000)
    args = parser.parse_args()
    asyncio.run(run(args.requests))


if __name__ == "__main__":
    main()
