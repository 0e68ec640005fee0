"""OpenID Connect access tokens: JWTs checked against the issuer's published keys.

The JOSE work is PyJWT's: signature, ``exp`` / ``nbf`` with a small leeway, ``iss``,
``aud``. Ours is around it:

- only the configured public-key algorithms are accepted, before anything else is read:
  ``alg: none`` and an HMAC token "signed" with the public key never reach a check;
- the keys (JWKS) come from ``jwks_url`` or the issuer's discovery document, are kept for
  ``jwks_cache_s``, and are fetched again when a token names a key id the set does not
  have (the issuer rotated its keys), at most once per ``REFETCH_S``, so tokens with
  made-up key ids cannot make the server hammer the issuer;
- a token that passed is remembered until it expires, so a client sending the same
  token on every request pays for one signature check.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import httpx
import jwt

from ostinato.identity.owners import check_owner_name
from ostinato.identity.settings import OidcSettings
from ostinato.server.auth.failures import InvalidToken, KeysUnavailable

__all__ = ["InvalidToken", "KeysUnavailable", "OidcVerifier", "Verified"]

REFETCH_S = 30.0  # unknown key ids fetch the keys again at most once in this long
REMEMBERED = 4096  # tokens remembered after a successful check
FETCH_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class Verified:
    owner: str
    expires_at: float  # the token's ``exp``, seconds since the epoch


class OidcVerifier:
    def __init__(
        self, settings: OidcSettings, *, client: httpx.AsyncClient | None = None, prefix: str = ""
    ) -> None:
        self.settings = settings
        self.prefix = prefix  # before every owner (AuthSettings.oidc_owner_prefix)
        self._client = client
        self._keys: dict[str | None, tuple[jwt.PyJWK, str | None]] = {}  # kid -> key, its alg
        self._fetched_at = -float("inf")
        self._missed_at = -float("inf")  # when a token's unknown key id last fetched the keys
        self._jwks_url = settings.jwks_url
        self._lock = asyncio.Lock()
        self._remembered: OrderedDict[str, tuple[Verified, str | None]] = OrderedDict()
        self._discovery: dict[str, Any] | None = None
        self._discovered_at = -float("inf")

    async def verify(self, token: str) -> Verified:
        """The owner a valid token names; ``InvalidToken`` or ``KeysUnavailable``."""
        remembered = self._remembered.get(token)
        if remembered is not None:
            known, kid = remembered
            if time.monotonic() - self._fetched_at > self.settings.jwks_cache_s:
                await self._refresh()  # the cache follows the issuer's key set
            if kid not in self._keys:
                del self._remembered[token]
                raise InvalidToken("the token was signed by a key the issuer no longer publishes")
            if known.expires_at + self.settings.leeway_s > time.time():
                return known
            del self._remembered[token]
            raise InvalidToken("the token has expired")
        verified, kid = await self._check(token)
        self._remembered[token] = (verified, kid)
        if len(self._remembered) > REMEMBERED:
            self._remembered.popitem(last=False)
        return verified

    async def _check(self, token: str) -> tuple[Verified, str | None]:
        """The token's owner, and the id of the key that signed it."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("the token is not a JWT") from None
        alg = header.get("alg")
        if alg not in self.settings.algorithms:
            raise InvalidToken(f"tokens signed with {str(alg)[:20]!r} are not accepted")
        kid, (key, declared) = await self._key(header.get("kid"))
        if declared is not None and declared != alg:
            raise InvalidToken("the token's algorithm is not the one its key is for")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key.key,
                algorithms=[alg],
                audience=self.settings.audience,
                issuer=self.settings.issuer,
                leeway=self.settings.leeway_s,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"the token is not valid: {exc}") from None
        owner = claims.get(self.settings.owner_claim)
        if not isinstance(owner, str):
            raise InvalidToken(f"the token has no {self.settings.owner_claim!r} claim to name you")
        try:
            check_owner_name(owner)
        except ValueError as exc:
            raise InvalidToken(f"the token's {self.settings.owner_claim!r} claim: {exc}") from None
        return Verified(self.prefix + owner, float(claims["exp"])), kid

    async def _key(self, kid: Any) -> tuple[str | None, tuple[jwt.PyJWK, str | None]]:
        now = time.monotonic()
        if now - self._fetched_at > self.settings.jwks_cache_s:
            await self._refresh()
        elif kid not in self._keys and now - self._missed_at > REFETCH_S:
            self._missed_at = now
            await self._refresh()
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.items()))
        found = self._keys.get(kid) if isinstance(kid, str) else None
        if found is None:
            raise InvalidToken("the token was signed by a key the issuer does not publish")
        return kid, found

    async def _refresh(self) -> None:
        before = self._fetched_at
        async with self._lock:
            if self._fetched_at != before:
                return  # another request fetched them while this one waited
            try:
                document = await self._get(await self._keys_url())
                keys = _usable_keys(document)
            except (httpx.HTTPError, ValueError) as exc:
                if not self._keys:
                    raise KeysUnavailable(f"cannot fetch the issuer's keys: {exc}") from None
                self._fetched_at = time.monotonic()  # keep the old keys a while longer
                return
            self._keys = keys
            self._fetched_at = time.monotonic()

    async def _keys_url(self) -> str:
        if self._jwks_url is None:
            url = (await self.discovery()).get("jwks_uri")
            if not isinstance(url, str):
                raise ValueError("the discovery document has no jwks_uri")
            self._jwks_url = url
        return self._jwks_url

    async def discovery(self) -> dict[str, Any]:
        """The issuer's discovery document (``httpx.HTTPError`` or ``ValueError`` when it
        cannot be read), kept for ``jwks_cache_s``."""
        now = time.monotonic()
        if self._discovery is None or now - self._discovered_at > self.settings.jwks_cache_s:
            issuer = self.settings.issuer.rstrip("/")
            self._discovery = await self._get(f"{issuer}/.well-known/openid-configuration")
            self._discovered_at = now
        return self._discovery

    @property
    def client(self) -> httpx.AsyncClient:
        """The HTTP client that talks to the issuer."""
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=FETCH_TIMEOUT_S)
        return self._client

    async def _get(self, url: str) -> dict[str, Any]:
        response = await self.client.get(url)
        response.raise_for_status()
        body = response.json()
        if not isinstance(body, dict):
            raise ValueError(f"{url} did not answer a JSON object")
        return body

    async def aclose(self) -> None:
        """Close the HTTP client that fetches the keys."""
        if self._client is not None:
            await self._client.aclose()


def _usable_keys(document: dict[str, Any]) -> dict[str | None, tuple[jwt.PyJWK, str | None]]:
    """The signing keys of a JWKS document by key id (keys that cannot sign, or that this
    PyJWT cannot read, are left out)."""
    found: dict[str | None, tuple[jwt.PyJWK, str | None]] = {}
    entries = document.get("keys")
    if not isinstance(entries, list):
        raise ValueError("the JWKS document has no keys")
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue
        try:
            key = jwt.PyJWK(entry)
        except jwt.PyJWTError:
            continue
        declared = entry.get("alg")
        found[entry.get("kid")] = (key, declared if isinstance(declared, str) else None)
    return found
