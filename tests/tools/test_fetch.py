"""http_fetch: every refusal form, re-vetted redirects, pinning, caps and charsets.

Nothing here reaches the internet: refused URLs are refused before any connection, and
the fetches that succeed go to a small HTTP server on 127.0.0.1 started by the test.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ostinato.errors import ToolError
from ostinato.tools.base import Tool, ToolContext
from ostinato.tools.fetch import (
    decode_body,
    fetch_family,
    host_allowed,
    http_fetch_tool,
    parse_allow_hosts,
)
from ostinato.tools.netguard import AddressRefused, IPAddress, ip_host, refusal, vet_host

LOOPBACK = ipaddress.IPv4Address("127.0.0.1")
CONTEXT = ToolContext("c", "t", "r", "u")


# --- a raw HTTP/1.1 server on 127.0.0.1 -------------------------------------------------

Handler = Callable[[str, dict[str, str], asyncio.StreamWriter], Awaitable[None]]


@dataclass
class LocalServer:
    port: int = 0
    routes: dict[str, Handler] = field(default_factory=dict)
    seen: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        _, target, _ = request_line.split(" ", 2)
        headers = {
            k.strip().lower(): v.strip()
            for k, _, v in (line.partition(":") for line in header_lines if line)
        }
        self.seen.append((target, headers))
        handler = self.routes.get(target, not_found)
        try:
            await handler(target, headers, writer)
            await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


def respond(
    status: str = "200 OK", body: bytes = b"", content_type: str = "text/plain", **headers: str
) -> Handler:
    async def handler(_: str, __: dict[str, str], writer: asyncio.StreamWriter) -> None:
        extra = "".join(f"{k.replace('_', '-')}: {v}\r\n" for k, v in headers.items())
        writer.write(
            f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\n"
            f"content-length: {len(body)}\r\n{extra}connection: close\r\n\r\n".encode()
            + body
        )

    return handler


def redirect(location: str, status: str = "302 Found") -> Handler:
    return respond(status, b"", location=location)


async def not_found(_: str, __: dict[str, str], writer: asyncio.StreamWriter) -> None:
    await respond("404 Not Found", b"nothing here")(_, __, writer)


async def echo_host(_: str, headers: dict[str, str], writer: asyncio.StreamWriter) -> None:
    await respond(body=f"host={headers.get('host')}".encode())(_, headers, writer)


@pytest.fixture
async def server() -> AsyncIterator[LocalServer]:
    local = LocalServer()
    listener = await asyncio.start_server(local.handle, "127.0.0.1", 0)
    local.port = listener.sockets[0].getsockname()[1]
    try:
        yield local
    finally:
        listener.close()
        await listener.wait_closed()


def resolver_from(table: dict[str, list[str]]) -> Callable[[str, int], Awaitable[list[IPAddress]]]:
    async def resolve(host: str, port: int) -> list[IPAddress]:
        if host not in table:
            raise AssertionError(f"the test resolver was asked for {host!r}")
        return [ipaddress.ip_address(a) for a in table[host]]

    return resolve


async def no_dns(host: str, port: int) -> list[IPAddress]:
    raise AssertionError(f"no name should be resolved here, got {host!r}")


def only_test_loopback(address: IPAddress) -> str | None:
    """The production policy, except that 127.0.0.1 itself (the test server) passes."""
    return None if address == LOOPBACK else refusal(address)


async def call(tool: Tool, url: str, method: str = "GET") -> str:
    arguments = tool.validate({"url": url, "method": method})
    result = await tool.run(arguments, CONTEXT)
    assert isinstance(result, str)
    return result


# --- the address rules --------------------------------------------------------------------

REFUSED_HOSTS = [
    "127.0.0.1",
    "127.255.255.254",
    "2130706433",  # 127.0.0.1 as one decimal number
    "0x7f.1",  # hex and a short form
    "0x7f000001",
    "017700000001",  # octal
    "0177.0.0.1",
    "127.1",
    "127.0.1",
    "[::ffff:127.0.0.1]",  # IPv4-mapped
    "[::ffff:7f00:1]",
    "[::ffff:169.254.169.254]",
    "[::1]",
    "[::]",
    "[::127.0.0.1]",  # IPv4-compatible
    "[2002:7f00:1::1]",  # 6to4 of 127.0.0.1
    "[2002:a9fe:a9fe::]",  # 6to4 of 169.254.169.254
    "[64:ff9b::a9fe:a9fe]",  # NAT64 of 169.254.169.254
    "[64:ff9b::10.0.0.1]",
    "[2001:0:4136:e378:8000:63bf:3fff:fdd2]",  # Teredo
    "10.0.0.1",
    "172.16.5.4",
    "172.31.255.255",
    "192.168.1.1",
    "169.254.169.254",  # cloud metadata
    "100.100.100.200",  # Alibaba metadata, CGNAT range
    "100.64.0.1",
    "0.0.0.0",
    "0",
    "224.0.0.1",
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.255",
    "192.0.2.10",
    "198.51.100.10",
    "203.0.113.10",
    "198.18.0.1",
    "192.0.0.170",
    "[fc00::1]",
    "[fd12:3456::1]",
    "[fe80::1]",
    "[fec0::1]",
    "[ff02::1]",
    "[2001:db8::1]",
    "[100::1]",
]


@pytest.mark.parametrize("host", REFUSED_HOSTS)
async def test_every_non_public_address_form_is_refused(host: str) -> None:
    tool = http_fetch_tool(allow_hosts=(), resolver=no_dns)
    # httpx itself rejects some spellings (dotted octal) as invalid URLs: refused too.
    with pytest.raises(ToolError, match=r"refused|not a valid URL"):
        await call(tool, f"http://{host}/latest/meta-data/")


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("10.1", "10.0.0.1"),
        ("0xA9.0xFE.0xA9.0xFE", "169.254.169.254"),
        ("0251.0376.0251.0376", "169.254.169.254"),
        ("8.8.8.8.", "8.8.8.8"),
        ("[::ffff:127.0.0.1]", "::ffff:7f00:1"),
    ],
)
def test_numeric_hosts_are_read_as_the_address_they_spell(host: str, address: str) -> None:
    assert ip_host(host) == ipaddress.ip_address(address)


@pytest.mark.parametrize("host", ["example.com", "localhost", "a1.b2.example"])
def test_names_are_not_addresses(host: str) -> None:
    assert ip_host(host) is None


@pytest.mark.parametrize("host", ["1.2.3.4.5", "256.1.1.1", "08.1.1.1", "foo.0x7f", "1.2.3.256"])
def test_malformed_numeric_hosts_are_refused(host: str) -> None:
    with pytest.raises(AddressRefused):
        ip_host(host)


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"]
)
def test_public_addresses_pass(address: str) -> None:
    assert refusal(ipaddress.ip_address(address)) is None


async def test_an_ipv4_mapped_public_address_is_dialled_as_ipv4() -> None:
    dialled = await vet_host("::ffff:8.8.8.8", 80, resolver=no_dns)
    assert dialled == [ipaddress.IPv4Address("8.8.8.8")]


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://example.com/file",
        "gopher://example.com/",
        "javascript:alert(1)",
        "http://user:secret@example.com/",
        "http://user@example.com/",
        "http://example.com:22/",
        "http://example.com:6379/",
        "https://example.com:25/",
    ],
)
async def test_schemes_userinfo_and_ports_are_refused_before_any_lookup(url: str) -> None:
    tool = http_fetch_tool(allow_hosts=(), resolver=no_dns)
    with pytest.raises(AddressRefused):
        await call(tool, url)


async def test_a_public_looking_name_that_resolves_to_a_private_address_is_refused() -> None:
    resolver = resolver_from(
        {
            "intranet.example.com": ["10.20.30.40"],
            "metadata.example.com": ["169.254.169.254"],
            "mixed.example.com": ["93.184.216.34", "127.0.0.1"],
            "v6.example.com": ["fd00::5"],
            "localhost": ["127.0.0.1", "::1"],
        }
    )
    tool = http_fetch_tool(allow_hosts=(), resolver=resolver)
    for host, shown in [
        ("intranet.example.com", "10.20.30.40 is a private address"),
        ("metadata.example.com", "169.254.169.254 is a link-local address"),
        ("mixed.example.com", "127.0.0.1 is a loopback address"),
        ("v6.example.com", "fd00::5 is a unique local"),
        ("localhost", "127.0.0.1 is a loopback"),
    ]:
        with pytest.raises(AddressRefused, match=shown):
            await call(tool, f"https://{host}/")


async def test_hosts_with_characters_no_name_has_are_refused() -> None:
    tool = http_fetch_tool(allow_hosts=(), resolver=no_dns)
    with pytest.raises(AddressRefused, match="not a valid host name"):
        await call(tool, "http://ex%41mple.com/")


async def test_the_production_default_refuses_the_local_test_server(server: LocalServer) -> None:
    server.routes["/"] = respond(body=b"secret")
    tool = http_fetch_tool(allow_hosts=(), ports=None)
    with pytest.raises(AddressRefused, match="loopback"):
        await call(tool, server.url("/"))
    with pytest.raises(AddressRefused, match=r"localhost resolves to 127\.0\.0\.1"):
        await call(tool, server.url("/", host="localhost"))  # through /etc/hosts
    assert server.seen == []


# --- allow-list ----------------------------------------------------------------------------


def test_allow_list_patterns() -> None:
    patterns = parse_allow_hosts(" Example.com, *.docs.example.org ,")
    assert patterns == ("example.com", "*.docs.example.org")
    assert host_allowed("example.com", patterns)
    assert host_allowed("EXAMPLE.com.", patterns)
    assert not host_allowed("www.example.com", patterns)
    assert host_allowed("a.docs.example.org", patterns)
    assert host_allowed("a.b.docs.example.org", patterns)
    assert not host_allowed("docs.example.org", patterns)
    assert not host_allowed("evildocs.example.org", patterns)
    assert host_allowed("anything.test", ())


async def test_a_host_off_the_allow_list_is_refused() -> None:
    tool = http_fetch_tool(allow_hosts=["docs.example.com"], resolver=no_dns)
    with pytest.raises(AddressRefused, match="allow-list"):
        await call(tool, "https://other.example.com/")


async def test_an_allowed_host_is_still_address_checked() -> None:
    resolver = resolver_from({"docs.example.com": ["192.168.0.10"]})
    tool = http_fetch_tool(allow_hosts="docs.example.com", resolver=resolver)
    with pytest.raises(AddressRefused, match="private"):
        await call(tool, "https://docs.example.com/")


async def test_redirects_leaving_the_allow_list_are_refused(server: LocalServer) -> None:
    server.routes["/go"] = redirect("http://elsewhere.test/")
    tool = http_fetch_tool(
        allow_hosts="public.test",
        ports=None,
        resolver=resolver_from({"public.test": ["127.0.0.1"]}),
        address_policy=only_test_loopback,
        follow_other_hosts=True,
    )
    with pytest.raises(AddressRefused, match=r"elsewhere\.test is not on"):
        await call(tool, server.url("/go", host="public.test"))


# --- connecting to the vetted address, and redirects ------------------------------------


async def test_the_connection_goes_to_the_vetted_address_with_the_original_host(
    server: LocalServer,
) -> None:
    # public.test exists in no DNS: the fetch can only reach the server because it dials
    # the address the resolver vetted, and says the original name in the Host header.
    server.routes["/who"] = echo_host
    tool = http_fetch_tool(
        allow_hosts=(),
        ports=None,
        resolver=resolver_from({"public.test": ["127.0.0.1"]}),
        address_policy=only_test_loopback,
    )
    text = await call(tool, server.url("/who", host="public.test"))
    assert text.startswith("status: 200 OK\n")
    assert f"url: http://public.test:{server.port}/who" in text
    assert text.endswith(f"host=public.test:{server.port}")


async def test_the_next_vetted_address_is_tried_when_one_cannot_connect(
    server: LocalServer,
) -> None:
    server.routes["/who"] = echo_host
    tool = http_fetch_tool(
        allow_hosts=(),
        ports=None,
        # ::1 first: nothing listens there on the test server's port (it is bound to
        # 127.0.0.1 only), so the connection fails and 127.0.0.1 is tried next.
        resolver=resolver_from({"public.test": ["::1", "127.0.0.1"]}),
        address_policy=lambda a: None if a in (LOOPBACK, ipaddress.ip_address("::1")) else "no",
    )
    text = await call(tool, server.url("/who", host="public.test"))
    assert text.endswith(f"host=public.test:{server.port}")


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("http://127.0.0.2:{port}/secret", "127.0.0.2 is a loopback address"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local"),
        ("http://0x7f.0.0.2:{port}/", "loopback"),
        ("http://[::ffff:10.0.0.1]:{port}/", "private"),
        ("http://inner.test:{port}/", "inner.test resolves to 10.9.8.7"),
        ("file:///etc/passwd", "only http and https"),
        ("http://admin:pw@public.test:{port}/", "user name or password"),
    ],
)
async def test_every_redirect_hop_is_vetted_again(
    server: LocalServer, target: str, reason: str
) -> None:
    server.routes["/start"] = redirect(target.format(port=server.port))
    tool = http_fetch_tool(
        allow_hosts=(),
        ports=None,
        resolver=resolver_from({"public.test": ["127.0.0.1"], "inner.test": ["10.9.8.7"]}),
        address_policy=only_test_loopback,
        follow_other_hosts=True,
    )
    with pytest.raises(AddressRefused, match=reason):
        await call(tool, server.url("/start", host="public.test"))
    assert [target for target, _ in server.seen] == ["/start"]


async def test_a_redirect_back_to_the_first_hops_own_address_is_refused(
    server: LocalServer,
) -> None:
    # The production policy, except that the test server's address passes the first
    # check only: the redirect to http://127.0.0.1/ must be refused by its own check.
    checks: list[IPAddress] = []

    def first_hop_only(address: IPAddress) -> str | None:
        checks.append(address)
        return None if len(checks) == 1 and address == LOOPBACK else refusal(address)

    server.routes["/start"] = redirect(server.url("/secret"))
    server.routes["/secret"] = respond(body=b"the metadata")
    tool = http_fetch_tool(
        allow_hosts=(),
        ports=None,
        resolver=resolver_from({"public.test": ["127.0.0.1"]}),
        address_policy=first_hop_only,
        follow_other_hosts=True,
    )
    with pytest.raises(AddressRefused, match=r"127\.0\.0\.1 is a loopback address"):
        await call(tool, server.url("/start", host="public.test"))
    assert checks == [LOOPBACK, LOOPBACK]
    assert [target for target, _ in server.seen] == ["/start"]


async def test_redirects_are_followed_to_an_allowed_target(server: LocalServer) -> None:
    server.routes["/a"] = redirect("/b", "301 Moved Permanently")
    server.routes["/b"] = redirect(server.url("/c", host="public.test"), "307 Temporary Redirect")
    server.routes["/c"] = respond(body=b"arrived")
    tool = http_fetch_tool(
        allow_hosts=(),
        ports=None,
        resolver=resolver_from({"public.test": ["127.0.0.1"]}),
        address_policy=only_test_loopback,
        follow_other_hosts=True,
    )
    text = await call(tool, server.url("/a"))
    assert f"url: http://public.test:{server.port}/c" in text
    assert "redirected from: " in text
    assert text.endswith("\n\narrived")


async def test_a_redirect_to_another_host_is_reported_not_followed(server: LocalServer) -> None:
    # A person who approved one site has not approved the sites it redirects to.
    server.routes["/a"] = redirect("/b", "301 Moved Permanently")  # the same host: followed
    server.routes["/b"] = redirect("https://elsewhere.test/?q=secret")
    tool = http_fetch_tool(allow_private=True, ports=None)
    text = await call(tool, server.url("/a"))
    assert text.startswith("status: 302 Found\n")
    assert f"url: http://127.0.0.1:{server.port}/b" in text
    assert f"redirected from: http://127.0.0.1:{server.port}/a" in text
    assert "note: the redirect to https://elsewhere.test/?q=secret was not followed" in text
    assert [target for target, _ in server.seen] == ["/a", "/b"]


async def test_a_redirect_to_the_same_host_on_another_scheme_or_port_is_followed(
    server: LocalServer,
) -> None:
    server.routes["/a"] = redirect(server.url("/b", host="PUBLIC.test"))
    server.routes["/b"] = respond(body=b"arrived")
    tool = http_fetch_tool(
        ports=None,
        resolver=resolver_from({"public.test": ["127.0.0.1"]}),
        address_policy=only_test_loopback,
    )
    text = await call(tool, f"http://public.test:{server.port}/a")
    assert text.endswith("\n\narrived")


async def test_redirect_loops_are_capped(server: LocalServer) -> None:
    server.routes["/loop"] = redirect("/loop")
    tool = http_fetch_tool(allow_private=True, ports=None, max_redirects=3)
    with pytest.raises(ToolError, match="more than 3 redirects"):
        await call(tool, server.url("/loop"))
    assert len(server.seen) == 4


def _certificates(tmp_path: Path, name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A test CA and a certificate for ``name`` it signed: (server context, client
    context that trusts only that CA)."""
    now = datetime.datetime.now(datetime.UTC)

    def build(
        subject: str,
        issuer: str,
        key: ec.EllipticCurvePrivateKey,
        signer: ec.EllipticCurvePrivateKey,
        ca: bool,
    ) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False
            )
        return builder.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = build("test CA", "test CA", ca_key, ca_key, True)
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = build(name, "test CA", key, ca_key, False)
    pem = serialization.Encoding.PEM
    (tmp_path / "leaf.pem").write_bytes(
        leaf.public_bytes(pem)
        + key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(tmp_path / "leaf.pem")
    client = ssl.create_default_context(cadata=ca.public_bytes(pem).decode())
    return server, client


async def test_https_is_pinned_with_the_original_name_for_sni_and_the_certificate(
    tmp_path: Path,
) -> None:
    server_tls, client_tls = _certificates(tmp_path, "public.test")
    local = LocalServer(routes={"/who": echo_host})
    listener = await asyncio.start_server(local.handle, "127.0.0.1", 0, ssl=server_tls)
    local.port = listener.sockets[0].getsockname()[1]
    tool = http_fetch_tool(
        allow_hosts=(),
        ports=None,
        resolver=resolver_from({"public.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]}),
        address_policy=only_test_loopback,
        verify=client_tls,
    )
    try:
        # Dialled by address, verified against the name: the certificate says public.test.
        text = await call(tool, f"https://public.test:{local.port}/who")
        assert text.endswith(f"host=public.test:{local.port}")
        # The same address under another name fails verification: the name is checked.
        with pytest.raises(
            ToolError, match=r"ConnectError: .*certificate verify failed: Hostname mismatch"
        ):
            await call(tool, f"https://other.test:{local.port}/who")
    finally:
        listener.close()
        await listener.wait_closed()


# --- what comes back -------------------------------------------------------------------------


async def test_the_body_is_cut_at_the_size_cap(server: LocalServer) -> None:
    server.routes["/big"] = respond(body=b"x" * 300_000)
    tool = http_fetch_tool(allow_private=True, ports=None, max_bytes=1000)
    text = await call(tool, server.url("/big"))
    assert "note: the body was cut at 1,000 bytes" in text
    assert text.split("\n\n", 1)[1] == "x" * 1000


async def test_a_stalled_server_meets_the_deadline(server: LocalServer) -> None:
    async def stall(_: str, __: dict[str, str], writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npartial")
        await writer.drain()
        await asyncio.Event().wait()

    server.routes["/slow"] = stall
    tool = http_fetch_tool(allow_private=True, ports=None, timeout=0.2)
    with pytest.raises(ToolError, match=r"took longer than 0.2 s"):
        await call(tool, server.url("/slow"))


async def test_text_is_decoded_per_its_charset(server: LocalServer) -> None:
    server.routes["/latin1"] = respond(
        body="café crème".encode("latin-1"), content_type="text/plain; charset=ISO-8859-1"
    )
    server.routes["/sjis"] = respond(
        body="こんにちは".encode("shift_jis"), content_type="text/html; charset=shift_jis"
    )
    server.routes["/json"] = respond(
        body='{"name": "Zoë"}'.encode(), content_type="application/json"
    )
    server.routes["/png"] = respond(body=b"\x89PNG\r\n\x1a\n\x00\x00", content_type="image/png")
    tool = http_fetch_tool(allow_private=True, ports=None)
    assert (await call(tool, server.url("/latin1"))).endswith("\n\ncafé crème")
    assert (await call(tool, server.url("/sjis"))).endswith("\n\nこんにちは")
    assert (await call(tool, server.url("/json"))).endswith('\n\n{"name": "Zoë"}')
    png = await call(tool, server.url("/png"))
    assert "binary content (10 bytes read) is not shown" in png


def test_decoding_without_a_charset_and_across_the_cut() -> None:
    assert decode_body("naïve".encode(), "text/plain") == "naïve"
    assert decode_body("naïve".encode("cp1252"), "text/plain") == "naïve"
    assert decode_body("é".encode()[:1], "text/plain", final=False) == ""
    assert decode_body(b"abc", "text/plain; charset=no-such-codec") == "abc"


async def test_head_and_error_statuses_are_returned_not_raised(server: LocalServer) -> None:
    server.routes["/gone"] = respond("410 Gone", b"it went away")
    tool = http_fetch_tool(allow_private=True, ports=None)
    text = await call(tool, server.url("/gone"))
    assert text.startswith("status: 410 Gone\n") and text.endswith("it went away")
    head = await call(tool, server.url("/gone"), method="HEAD")
    assert head.startswith("status: 410 Gone\n")
    assert "it went away" not in head
    assert server.seen[-1][0] == "/gone"


async def test_a_refused_connection_is_a_tool_error() -> None:
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()
    tool = http_fetch_tool(allow_private=True, ports=None)
    with pytest.raises(ToolError, match="ConnectError"):
        await call(tool, f"http://127.0.0.1:{port}/")


def test_the_tool_declares_its_risk() -> None:
    tool = http_fetch_tool(allow_hosts=())
    assert (tool.name, tool.category, tool.risk, tool.idempotent) == (
        "http_fetch",
        "read",
        "network",
        True,
    )
    assert set(tool.parameters["properties"]) == {"url", "method"}


# --- consent: the risk, the family a grant remembers, checks before anyone is asked -------


def test_the_tool_asks_by_site_and_brings_untrusted_content() -> None:
    tool = http_fetch_tool(resolver=no_dns)
    assert (tool.risk, tool.category, tool.untrusted) == ("network", "read", True)
    assert tool.family is fetch_family


@pytest.mark.parametrize(
    ("url", "family"),
    [
        ("https://Example.COM/a/b?c=d#e", "https://example.com:443"),
        ("https://example.com:443/other", "https://example.com:443"),
        ("http://example.com/", "http://example.com:80"),
        ("http://example.com:8080/x", "http://example.com:8080"),
        ("https://example.com./", "https://example.com:443"),
        ("https://[2001:db8::1]/x", "https://[2001:db8::1]:443"),
        ("https://bücher.example/", "https://xn--bcher-kva.example:443"),
        ("ftp://example.com/", None),
        ("https://user:pw@example.com/", None),
        ("not a url", None),
        ("https:///nohost", None),
    ],
)
def test_the_family_is_the_site(url: str, family: str | None) -> None:
    assert fetch_family({"url": url}) == family


def test_no_family_without_a_url() -> None:
    assert fetch_family({}) is None
    assert fetch_family({"url": 42}) is None


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://other.example/", "allow-list"),
        ("file:///etc/passwd", "only http and https"),
        ("https://a:b@docs.example.com/", "user name or password"),
        ("https://docs.example.com:22/", "port 22"),
    ],
)
def test_refusals_that_need_no_network_come_when_the_call_is_validated(
    url: str, reason: str
) -> None:
    tool = http_fetch_tool(allow_hosts="docs.example.com", resolver=no_dns)
    with pytest.raises(AddressRefused, match=reason):
        tool.validate({"url": url})
    assert tool.validate({"url": "https://docs.example.com/x"})["url"].endswith("/x")
