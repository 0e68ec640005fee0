"""A local OpenID Connect issuer for tests: a real HTTP server on 127.0.0.1 that serves
a discovery document and a JWKS, and signs tokens with its test keys."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

AUDIENCE = "ostinato"


@dataclass
class Issuer:
    """A local identity provider: its discovery document and JWKS, and a signer."""

    url: str
    keys: dict[str, Any] = field(default_factory=dict)  # kid -> private key
    published: list[str] = field(default_factory=list)  # kids in the JWKS
    fetches: int = 0

    def add_key(self, kid: str, key: Any | None = None) -> None:
        self.keys[kid] = key or rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.published.append(kid)

    def jwks(self) -> dict[str, Any]:
        entries = []
        for kid in self.published:
            public = self.keys[kid].public_key()
            algorithm = (
                jwt.algorithms.RSAAlgorithm
                if isinstance(public, rsa.RSAPublicKey)
                else jwt.algorithms.ECAlgorithm
            )
            entry = json.loads(algorithm.to_jwk(public))
            entries.append({**entry, "kid": kid, "use": "sig"})
        return {"keys": entries}

    def token(self, kid: str = "k1", *, alg: str = "RS256", **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.url, "aud": AUDIENCE, "sub": "ann", "iat": now, "exp": now + 300}
        body.update(claims)
        return jwt.encode(body, self.keys[kid], algorithm=alg, headers={"kid": kid})


@contextmanager
def serve_issuer() -> Iterator[Issuer]:
    """An issuer with one RSA key, ``k1``, serving until the block ends."""
    state = Issuer("")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/.well-known/openid-configuration":
                body: dict[str, Any] = {"issuer": state.url, "jwks_uri": f"{state.url}/jwks"}
            elif self.path == "/jwks":
                state.fetches += 1
                body = state.jwks()
            else:
                self.send_error(404)
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    state.add_key("k1")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
