"""A local OpenID provider for sign-in tests: a real HTTP server on 127.0.0.1.

- ``/.well-known/openid-configuration``: the discovery document;
- ``/authorize``: the authorization endpoint. It shows no login screen: it checks the
  request (``response_type=code``, the client id, an S256 code challenge) and sends the
  browser straight back to ``redirect_uri`` with a code and the ``state`` it was given,
  signed in as ``user`` (or with ``error=access_denied`` when ``deny`` is set);
- ``/token``: the token endpoint. It trades a code once, for the same client and
  redirect URI, when the PKCE verifier hashes to the challenge (RFC 7636 S256), for an
  RS256 JWT access token (``aud`` the API's audience) and an ID token;
- ``/jwks``: the public key.

What it was asked is kept in ``authorized`` and ``exchanged`` for tests to read.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote_plus, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa


@dataclass
class Grant:
    client_id: str
    redirect_uri: str
    challenge: str
    user: str
    used: bool = False


def s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class FakeIssuer:
    def __init__(
        self,
        *,
        client_id: str = "ostinato-page",
        audience: str = "ostinato",
        user: str = "carol",
        client_secret: str | None = None,
    ) -> None:
        self.client_id = client_id
        self.audience = audience
        self.user = user
        self.client_secret = client_secret
        self.deny = False
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.grants: dict[str, Grant] = {}
        self.authorized: list[dict[str, str]] = []
        self.exchanged: list[dict[str, str]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeIssuer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- what it serves ----------------------------------------------------------------

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "authorization_endpoint": f"{self.url}/authorize",
            "token_endpoint": f"{self.url}/token",
            "jwks_uri": f"{self.url}/jwks",
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
        }

    def jwks(self) -> dict[str, Any]:
        entry = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**entry, "kid": "k1", "use": "sig", "alg": "RS256"}]}

    def token(self, sub: str, audience: str | None = None, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.url, "aud": audience or self.audience, "sub": sub}
        body |= {"iat": now, "exp": now + 300, **claims}
        return jwt.encode(body, self.key, algorithm="RS256", headers={"kid": "k1"})

    def authorize(self, query: dict[str, str]) -> tuple[int, dict[str, str]]:
        """The redirect (302 and its Location) or a refusal (400) for an authorization
        request."""
        self.authorized.append(query)
        redirect = query.get("redirect_uri", "")
        if (
            query.get("response_type") != "code"
            or query.get("client_id") != self.client_id
            or query.get("code_challenge_method") != "S256"
            or len(query.get("code_challenge", "")) < 43
            or not redirect.startswith("http")
        ):
            return 400, {}
        back = {"state": query["state"]} if "state" in query else {}
        if self.deny:
            back |= {"error": "access_denied", "error_description": "the person said no"}
        else:
            code = secrets.token_urlsafe(16)
            self.grants[code] = Grant(self.client_id, redirect, query["code_challenge"], self.user)
            back["code"] = code
        return 302, {"location": f"{redirect}{'&' if '?' in redirect else '?'}{urlencode(back)}"}

    def exchange(self, form: dict[str, str], basic: str | None) -> tuple[int, dict[str, Any]]:
        """The token endpoint's answer to ``form`` (and an ``Authorization: Basic``)."""
        self.exchanged.append(form)
        client_id = form.get("client_id")
        if self.client_secret is not None:  # HTTP Basic of the form-encoded pair (RFC 6749)
            pair = base64.b64decode(basic or "").decode().partition(":")
            if (unquote_plus(pair[0]), unquote_plus(pair[2])) != (
                self.client_id,
                self.client_secret,
            ):
                return 401, {"error": "invalid_client"}
        grant = self.grants.get(form.get("code", ""))
        if (
            form.get("grant_type") != "authorization_code"
            or grant is None
            or grant.used
            or client_id != grant.client_id
            or form.get("redirect_uri") != grant.redirect_uri
            or s256(form.get("code_verifier", "")) != grant.challenge
        ):
            return 400, {"error": "invalid_grant", "error_description": "the code is refused"}
        grant.used = True
        return 200, {
            "access_token": self.token(grant.user),
            "id_token": self.token(grant.user, audience=self.client_id),
            "token_type": "Bearer",
            "expires_in": 300,
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                if url.path == "/.well-known/openid-configuration":
                    self._json(200, issuer.discovery())
                elif url.path == "/jwks":
                    self._json(200, issuer.jwks())
                elif url.path == "/authorize":
                    status, headers = issuer.authorize(dict(parse_qsl(url.query)))
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("content-length", "0")
                    self.end_headers()
                else:
                    self._json(404, {"error": "not_found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                form = dict(parse_qsl(self.rfile.read(length).decode()))
                if urlsplit(self.path).path != "/token":
                    self._json(404, {"error": "not_found"})
                    return
                auth = self.headers.get("authorization") or ""
                basic = auth[6:] if auth.lower().startswith("basic ") else None
                self._json(*issuer.exchange(form, basic))

            def _json(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler
