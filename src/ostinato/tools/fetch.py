"""``http_fetch``: read a public web page or API over http(s), and nothing else.

Every hop of a fetch is vetted the same way before a byte is sent:

1. the URL is http or https, carries no user name or password, and names an allowed port
   (80, 443, 8080 and 8443 unless configured otherwise);
2. when the deployment has an allow-list (``allow_hosts``, the setting
   ``tools.fetch_allow_hosts``: host names, exact or ``*.suffix``), the host is on it;
3. the host is resolved once (a numeric host, however it is spelled, is read as the
   address it is) and every address must be public (``netguard.refusal``);
4. the connection goes to that vetted address, not to the name again: the URL is
   rewritten to the address, with the ``Host`` header and TLS server name (SNI, and so
   certificate checks) set to the original name. A DNS answer that changes between the
   check and the connection cannot move the request.

Redirects are followed by hand, at most five, each target vetted as above, and only
within the first URL's host: a redirect to another host is not followed but reported, so
that fetching it is a call of its own, with its own approval (a person who approved one
site has not approved the sites it redirects to). The body is
streamed and reading stops at a size cap (1 MB); the whole fetch, redirects included,
has one deadline (20 s). Proxies from the environment are ignored, since a proxy would
undo the pinning.

The tool's risk is ``network`` (the default approval policy asks before it runs), its
family is the URL's site, ``scheme://host:port`` (a remembered family grant covers one
site), and the checks of steps 1 and 2 run when its arguments are validated, so a person
is never asked about a URL that would be refused anyway.
"""

from __future__ import annotations

import asyncio
import codecs
import dataclasses
import ssl
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from email.message import Message
from typing import TYPE_CHECKING, Any, Literal

from ostinato.errors import ToolError
from ostinato.messages import JSON
from ostinato.tools.base import Tool
from ostinato.tools.functions import function_tool
from ostinato.tools.netguard import (
    AddressPolicy,
    AddressRefused,
    Resolver,
    ip_host,
    refusal,
    system_resolver,
    vet_host,
)

# httpx is loaded by the first fetch, not by the server's import (start-up time).
if TYPE_CHECKING:
    import httpx

DEFAULT_PORTS = frozenset({80, 443, 8080, 8443})
MAX_BYTES = 1_000_000
MAX_REDIRECTS = 5
TOTAL_TIMEOUT = 20.0
USER_AGENT = "ostinato-http-fetch/0.1"

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_TEXT_TYPES = ("json", "xml", "javascript", "ecmascript", "yaml", "csv", "x-www-form-urlencoded")


@dataclass(frozen=True, slots=True)
class FetchPolicy:
    """What a fetch may reach and how much it may read.

    ``ports`` ``None`` allows any port; ``allow_hosts`` empty allows every host (still
    subject to the address checks); ``address_policy`` ``None`` skips the address checks
    altogether (for tests against a server on 127.0.0.1, never in production).
    """

    allow_hosts: tuple[str, ...] = ()
    ports: frozenset[int] | None = DEFAULT_PORTS
    address_policy: AddressPolicy | None = refusal
    resolver: Resolver = system_resolver
    max_bytes: int = MAX_BYTES
    max_redirects: int = MAX_REDIRECTS
    timeout: float = TOTAL_TIMEOUT
    verify: ssl.SSLContext | bool = True
    follow_other_hosts: bool = False  # follow redirects to another host than the first


@dataclass(slots=True)
class FetchResult:
    status: int
    reason: str
    url: str
    content_type: str
    body: bytes
    truncated: bool
    redirects: list[str] = field(default_factory=list)
    not_followed: str | None = None  # a redirect to another host, reported, not followed

    def text(self) -> str | None:
        """The body decoded per its charset, or ``None`` for a binary body."""
        return decode_body(self.body, self.content_type, final=not self.truncated)

    def render(self, max_bytes: int) -> str:
        lines = [f"status: {self.status} {self.reason}".rstrip(), f"url: {self.url}"]
        if self.redirects:
            lines.append("redirected from: " + " -> ".join(self.redirects))
        lines.append(f"content-type: {self.content_type or 'unknown'}")
        if self.not_followed:
            lines.append(
                f"note: the redirect to {self.not_followed} was not followed: it is another "
                "host, so fetching it is a request of its own (it may need the user's approval)"
            )
        if self.truncated:
            lines.append(f"note: the body was cut at {max_bytes:,} bytes")
        text = self.text()
        if text is None:
            lines.append(f"note: binary content ({len(self.body):,} bytes read) is not shown")
            return "\n".join(lines)
        return "\n".join(lines) + "\n\n" + text


def parse_allow_hosts(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """Allow-list patterns, lower-cased: ``example.com`` or ``*.example.com``."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    return tuple(p.strip().lower().rstrip(".") for p in items if p.strip())


def host_allowed(host: str, patterns: Collection[str]) -> bool:
    """``example.com`` allows exactly that host; ``*.example.com`` any name under it (not
    ``example.com`` itself). An empty allow-list allows every host."""
    if not patterns:
        return True
    host = host.lower().rstrip(".")
    for pattern in patterns:
        if pattern.startswith("*."):
            if host.endswith(pattern[1:]) and len(host) > len(pattern) - 1:
                return True
        elif host == pattern:
            return True
    return False


def decode_body(body: bytes, content_type: str, *, final: bool = True) -> str | None:
    """Decode per the declared charset; undeclared, UTF-8 if it is, else windows-1252.
    ``None`` for content that is not text. ``final`` ``False`` drops a character cut in
    half by the size cap."""
    message = Message()
    message["content-type"] = content_type or "application/octet-stream"
    mime = message.get_content_type()
    charset = message.get_param("charset")
    if content_type and not _is_text(mime):
        return None
    if isinstance(charset, str):
        try:
            decoder = codecs.getincrementaldecoder(charset)(errors="replace")
        except LookupError:
            pass
        else:
            return decoder.decode(body, final=final)
    try:
        return codecs.getincrementaldecoder("utf-8")(errors="strict").decode(body, final=final)
    except UnicodeDecodeError:
        if not content_type and b"\x00" in body[:1024]:
            return None
        return body.decode("cp1252", errors="replace")


def _host_of(url: str) -> str | None:
    import httpx

    try:
        return httpx.URL(url).raw_host.decode("ascii").lower().rstrip(".") or None
    except (httpx.InvalidURL, TypeError, ValueError):
        return None


def fetch_family(arguments: Mapping[str, Any]) -> str | None:
    """The site an ``http_fetch`` call goes to, ``scheme://host:port`` (the port always
    written, the host lower-case, in ASCII): a remembered family grant covers one site,
    not one URL. None for anything that is not an http(s) URL with a host."""
    import httpx

    url = arguments.get("url")
    if not isinstance(url, str):
        return None
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return None
    host = _host_of(url)
    if parsed.scheme not in ("http", "https") or not host or parsed.userinfo:
        return None
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return f"{parsed.scheme}://{f'[{host}]' if ':' in host else host}:{port}"


def _is_text(mime: str) -> bool:
    major, _, minor = mime.partition("/")
    return major == "text" or any(t in minor for t in _TEXT_TYPES)


class Fetcher:
    """Fetch a URL under a ``FetchPolicy``. Each hop has a client of its own: a pool is
    keyed by the dialled address, and a TLS connection verified for one name must not
    carry a request for another name that happens to share the address."""

    def __init__(self, policy: FetchPolicy) -> None:
        self.policy = policy

    async def fetch(self, url: str, method: Literal["GET", "HEAD"] = "GET") -> FetchResult:
        try:
            async with asyncio.timeout(self.policy.timeout):
                return await self._follow(url, method)
        except TimeoutError:
            raise ToolError(
                f"fetching {url} took longer than {self.policy.timeout:g} s; gave up"
            ) from None

    def check(self, url: str) -> httpx.URL:
        """The checks that need no network: scheme, credentials, port, allow-list."""
        return self._parse(url)

    async def _follow(self, url: str, method: Literal["GET", "HEAD"]) -> FetchResult:
        current = self._parse(url)
        host = self._host(current)
        visited: list[str] = []
        while True:
            result, location = await self._hop(current, method)
            if location is None:
                result.redirects = visited
                return result
            visited.append(str(current))
            if len(visited) > self.policy.max_redirects:
                raise ToolError(f"more than {self.policy.max_redirects} redirects; gave up")
            target = self._join(current, location)
            if not self.policy.follow_other_hosts and _host_of(target) != host:
                result.redirects, result.not_followed = visited[:-1], target
                return result
            try:
                current = self._parse(target)
            except AddressRefused as exc:
                raise AddressRefused(f"redirect to {location}: {exc.message}") from None

    @staticmethod
    def _join(current: httpx.URL, location: str) -> str:
        import httpx

        try:
            return str(current.join(location))
        except (httpx.InvalidURL, TypeError, ValueError) as exc:
            raise ToolError(f"a redirect to an invalid URL: {location} ({exc})") from None

    def _parse(self, url: str | httpx.URL) -> httpx.URL:
        import httpx

        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise ToolError(f"not a valid URL: {url} ({exc})") from None
        if parsed.scheme not in ("http", "https"):
            raise AddressRefused(f"only http and https URLs can be fetched, not {parsed.scheme!r}")
        if not parsed.host:
            raise ToolError(f"the URL {url} names no host")
        if parsed.userinfo:
            raise AddressRefused("URLs with a user name or password are refused")
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        if self.policy.ports is not None and port not in self.policy.ports:
            allowed = ", ".join(str(p) for p in sorted(self.policy.ports))
            raise AddressRefused(f"port {port} is not allowed (allowed: {allowed})")
        if not host_allowed(self._host(parsed), self.policy.allow_hosts):
            raise AddressRefused(f"{parsed.host} is not on this deployment's fetch allow-list")
        return parsed.copy_with(fragment=None)

    @staticmethod
    def _host(url: httpx.URL) -> str:
        return url.raw_host.decode("ascii")

    def _client(self) -> httpx.AsyncClient:
        import httpx

        return httpx.AsyncClient(
            trust_env=False,  # a proxy from the environment would undo the pinning
            follow_redirects=False,
            timeout=httpx.Timeout(self.policy.timeout),
            verify=self.policy.verify,
        )

    async def _hop(self, url: httpx.URL, method: str) -> tuple[FetchResult, str | None]:
        import httpx

        host = self._host(url)
        port = url.port or (443 if url.scheme == "https" else 80)
        addresses = await vet_host(
            host, port, resolver=self.policy.resolver, policy=self.policy.address_policy
        )
        headers = {
            "Host": url.netloc.decode("ascii"),
            "User-Agent": USER_AGENT,
            "Accept": "text/html, text/plain, application/json, */*;q=0.5",
            # Uncompressed, so the size cap counts what arrives: no compression bomb.
            "Accept-Encoding": "identity",
        }
        extensions = {}
        if url.scheme == "https" and ip_host(host) is None:
            extensions["sni_hostname"] = host
        for i, address in enumerate(addresses):
            # Each vetted address in turn while the connection itself fails (say, an
            # IPv6 answer on a host without IPv6); once connected, no more tries.
            dial = url.copy_with(host=str(address))
            try:
                async with (
                    self._client() as client,
                    client.stream(method, dial, headers=headers, extensions=extensions) as response,
                ):
                    if response.status_code in _REDIRECTS and "location" in response.headers:
                        location = response.headers["location"]
                        return self._result(url, response, b"", False), location
                    body, truncated = await self._read(response)
                    return self._result(url, response, body, truncated), None
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if i + 1 < len(addresses):
                    continue
                raise ToolError(f"fetching {url} failed: {type(exc).__name__}: {exc}") from None
            except httpx.HTTPError as exc:
                raise ToolError(f"fetching {url} failed: {type(exc).__name__}: {exc}") from None
        raise AssertionError("vet_host returns at least one address")

    async def _read(self, response: httpx.Response) -> tuple[bytes, bool]:
        cap = self.policy.max_bytes
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size > cap:
                return b"".join(chunks)[:cap], True
        return b"".join(chunks), False

    @staticmethod
    def _result(
        url: httpx.URL, response: httpx.Response, body: bytes, truncated: bool
    ) -> FetchResult:
        return FetchResult(
            status=response.status_code,
            reason=response.reason_phrase,
            url=str(url),
            content_type=response.headers.get("content-type", ""),
            body=body,
            truncated=truncated,
        )


def http_fetch_tool(
    allow_hosts: str | Iterable[str] | None = None,
    allow_private: bool = False,
    *,
    ports: Collection[int] | None = DEFAULT_PORTS,
    max_bytes: int = MAX_BYTES,
    max_redirects: int = MAX_REDIRECTS,
    timeout: float = TOTAL_TIMEOUT,
    resolver: Resolver = system_resolver,
    address_policy: AddressPolicy | None = None,
    verify: ssl.SSLContext | bool = True,
    follow_other_hosts: bool = False,
    name: str = "http_fetch",
) -> Tool:
    """The ``http_fetch`` tool (risk ``network``, category ``read``, idempotent, its
    family the URL's site, its results untrusted).

    ``allow_hosts`` (host names, or one comma-separated string); ``None`` or empty, every
    public host may be fetched. ``allow_private`` turns the address checks off: only for
    tests against a local server. ``address_policy`` replaces ``netguard.refusal``;
    ``resolver`` replaces the system resolver; ``verify`` is httpx's TLS verification
    (a context trusting a test CA in tests). ``follow_other_hosts`` follows redirects to
    other hosts too (each still vetted), for deployments that do not ask before a fetch.
    """
    policy = FetchPolicy(
        allow_hosts=parse_allow_hosts(allow_hosts),
        ports=None if ports is None else frozenset(ports),
        address_policy=None if allow_private else (address_policy or refusal),
        resolver=resolver,
        max_bytes=max_bytes,
        max_redirects=max_redirects,
        timeout=timeout,
        verify=verify,
        follow_other_hosts=follow_other_hosts,
    )
    fetcher = Fetcher(policy)

    async def http_fetch(url: str, method: Literal["GET", "HEAD"] = "GET") -> str:
        """Fetch a public web page or HTTP API and return its status, final URL, content
        type and body as text (cut at a size cap). Only http(s) URLs on public hosts.

        Args:
            url: The http or https URL to fetch.
            method: GET for the body, HEAD for the status and headers only.
        """
        result = await fetcher.fetch(url, method)
        return result.render(policy.max_bytes)

    tool = function_tool(
        http_fetch,
        name=name,
        category="read",
        risk="network",
        idempotent=True,
        timeout=timeout + 5.0,
        family=fetch_family,
        untrusted=True,
    )
    return _checked_when_validated(tool, fetcher)


def _checked_when_validated(tool: Tool, fetcher: Fetcher) -> Tool:
    """The tool, whose validation also runs the fetcher's checks that need no network:
    a URL that would be refused is refused before anyone is asked about it."""
    schema_check = tool.validate

    def validate(arguments: JSON) -> JSON:
        valid = schema_check(arguments)
        fetcher.check(valid["url"])
        return valid

    return dataclasses.replace(tool, validate=validate)
