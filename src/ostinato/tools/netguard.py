"""Which addresses a fetch may reach: public ones only.

``refusal(address)`` says why an address is not public, or ``None``; ``ip_host(host)``
reads every numeric spelling of an address a URL may hide (``2130706433``, ``0x7f.1``,
``017700000001``, ``127.1``, ``[::ffff:127.0.0.1]``) the way ``inet_aton`` and browsers
do; ``vet_host`` resolves a name once and returns the addresses that passed, so the caller
connects to exactly what was checked.

The checks do not trust ``ipaddress.is_global`` alone (multicast, 6to4, NAT64 and
IPv4-compatible addresses pass it): explicit tables come first, ``is_global`` last.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable
from typing import TypeAlias

from ostinato.errors import ToolError

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver: TypeAlias = Callable[[str, int], Awaitable[list[IPAddress]]]
AddressPolicy: TypeAlias = Callable[[IPAddress], str | None]

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

_IPV4_REFUSED: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_V4("0.0.0.0/8"), "an unspecified ('this network') address"),
    (_V4("10.0.0.0/8"), "a private address"),
    (_V4("100.64.0.0/10"), "a shared (CGNAT) address, where cloud metadata services live"),
    (_V4("127.0.0.0/8"), "a loopback address"),
    (_V4("169.254.0.0/16"), "a link-local address, where cloud metadata services live"),
    (_V4("172.16.0.0/12"), "a private address"),
    (_V4("192.0.0.0/24"), "an IETF protocol address"),
    (_V4("192.0.2.0/24"), "a documentation address"),
    (_V4("192.88.99.0/24"), "a 6to4 relay address"),
    (_V4("192.168.0.0/16"), "a private address"),
    (_V4("198.18.0.0/15"), "a benchmarking address"),
    (_V4("198.51.100.0/24"), "a documentation address"),
    (_V4("203.0.113.0/24"), "a documentation address"),
    (_V4("224.0.0.0/4"), "a multicast address"),
    (_V4("240.0.0.0/4"), "a reserved address"),
)

_IPV6_GLOBAL_UNICAST = _V6("2000::/3")
_IPV6_REFUSED: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_V6("2001::/32"), "a Teredo address"),
    (_V6("2001::/23"), "an IETF protocol address"),
    (_V6("2001:db8::/32"), "a documentation address"),
    (_V6("3fff::/20"), "a documentation address"),
)
_IPV6_OUTSIDE: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_V6("fc00::/7"), "a unique local (private) address"),
    (_V6("fe80::/10"), "a link-local address"),
    (_V6("fec0::/10"), "a site-local address"),
    (_V6("ff00::/8"), "a multicast address"),
)
_IPV4_COMPATIBLE = _V6("::/96")
_NAT64 = _V6("64:ff9b::/96")

_NUMBER = re.compile(r"^(0[xX][0-9a-fA-F]*|[0-9]+)$")
_HOSTNAME = re.compile(r"^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$")


class AddressRefused(ToolError):
    """The URL names, or its host resolves to, an address a fetch may not reach."""

    code = "address_refused"


def refusal(address: IPAddress) -> str | None:
    """Why ``address`` is not a public unicast address, or ``None`` when it is."""
    if isinstance(address, ipaddress.IPv4Address):
        return _refusal_v4(address)
    return _refusal_v6(address)


def _refusal_v4(address: ipaddress.IPv4Address) -> str | None:
    for network, reason in _IPV4_REFUSED:
        if address in network:
            return f"{address} is {reason}"
    if address == ipaddress.IPv4Address("255.255.255.255"):
        return f"{address} is the broadcast address"
    if not address.is_global:
        return f"{address} is not a public address"
    return None


def _embedded(
    address: ipaddress.IPv6Address, inner: ipaddress.IPv4Address, form: str
) -> str | None:
    reason = _refusal_v4(inner)
    return None if reason is None else f"{address} is {form} of {inner}, and {reason}"


def _refusal_v6(address: ipaddress.IPv6Address) -> str | None:
    if address.scope_id:
        return f"{address} carries a zone id"
    if address.ipv4_mapped is not None:
        return _embedded(address, address.ipv4_mapped, "the IPv4-mapped form")
    if address in _IPV4_COMPATIBLE:
        return f"{address} is an IPv4-compatible (or unspecified/loopback) address"
    if address in _NAT64:
        inner = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        return _embedded(address, inner, "the NAT64 form")
    if address.sixtofour is not None:
        return _embedded(address, address.sixtofour, "the 6to4 form")
    for network, reason in _IPV6_OUTSIDE:
        if address in network:
            return f"{address} is {reason}"
    if address not in _IPV6_GLOBAL_UNICAST:
        return f"{address} is not a global unicast address"
    for network, reason in _IPV6_REFUSED:
        if address in network:
            return f"{address} is {reason}"
    if not address.is_global:
        return f"{address} is not a public address"
    return None


def connect_address(address: IPAddress) -> IPAddress:
    """The address to dial: an IPv4-mapped IPv6 address is dialled as its IPv4."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def ip_host(host: str) -> IPAddress | None:
    """The address a URL host spells numerically, or ``None`` for a name.

    IPv4 is read as ``inet_aton`` and the WHATWG URL standard read it: one to four parts,
    each decimal, octal (leading ``0``) or hex (``0x``), the last filling the remaining
    bytes. A host that ends in a number but is no valid address raises ``AddressRefused``.
    """
    host = host.strip("[]")
    if ":" in host:
        if "%" in host:
            raise AddressRefused(f"{host} carries a zone id")
        try:
            return ipaddress.IPv6Address(host)
        except ValueError:
            raise AddressRefused(f"{host!r} is not a valid IPv6 address") from None
    labels = host.split(".")
    if labels and labels[-1] == "":
        labels.pop()
    if not labels or not _NUMBER.match(labels[-1]):
        return None
    if len(labels) > 4 or not all(_NUMBER.match(label) for label in labels):
        raise AddressRefused(f"{host!r} is neither a host name nor a valid IPv4 address")
    try:
        numbers = [_ipv4_part(label) for label in labels]
    except ValueError:
        raise AddressRefused(f"{host!r} is not a valid IPv4 address") from None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        raise AddressRefused(f"{host!r} is not a valid IPv4 address")
    value = last
    for i, n in enumerate(head):
        value += n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


def _ipv4_part(label: str) -> int:
    if label[:2].lower() == "0x":
        return int(label[2:] or "0", 16)
    if len(label) > 1 and label.startswith("0"):
        return int(label, 8)
    return int(label, 10)


def check_hostname(host: str) -> str:
    """The host name, lower-cased without a trailing dot, or ``AddressRefused`` when it
    holds characters no DNS name has (percent signs, spaces, ...)."""
    name = host.lower().rstrip(".")
    if not name or len(name) > 253 or not _HOSTNAME.match(name):
        raise AddressRefused(f"{host!r} is not a valid host name")
    return name


async def system_resolver(host: str, port: int) -> list[IPAddress]:
    """Resolve once through the event loop's ``getaddrinfo``."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
    except socket.gaierror as exc:
        raise ToolError(f"could not resolve {host!r}: {exc.strerror}") from None
    found: list[IPAddress] = []
    for _, _, _, _, sockaddr in infos:
        # A link-local answer may carry its zone ("fe80::1%eth0"): kept, and so refused.
        address = ipaddress.ip_address(str(sockaddr[0]))
        if address not in found:
            found.append(address)
    return found


async def vet_host(
    host: str,
    port: int,
    *,
    resolver: Resolver = system_resolver,
    policy: AddressPolicy | None = refusal,
) -> list[IPAddress]:
    """The addresses to connect to for ``host``, in the resolver's order: a numeric host
    as it is, a name resolved once. Every address the name resolves to must pass
    ``policy`` (a name with one private address among public ones is refused: it is a
    rebinding tool); ``None`` as the policy accepts any address (tests against a local
    server)."""
    literal = ip_host(host)
    if literal is not None:
        addresses = [literal]
    else:
        addresses = await resolver(check_hostname(host), port)
        if not addresses:
            raise ToolError(f"{host!r} resolves to no address")
    if policy is not None:
        for address in addresses:
            reason = policy(address)
            if reason is not None:
                shown = "" if literal is not None else f"{host} resolves to {address}: "
                raise AddressRefused(f"refused: {shown}{reason}")
    dialled: list[IPAddress] = []
    for address in map(connect_address, addresses):
        if address not in dialled:
            dialled.append(address)
    return dialled
