"""Where a server may listen, given who may call it.

Mode ``none`` lets every caller act as the one local owner: run it on a loopback
address, where only this machine can reach it. ``ostinato serve`` refuses a
non-loopback address in that mode unless started with ``DANGER_FLAG``.
"""

from __future__ import annotations

import ipaddress

from ostinato.identity.settings import AuthSettings

DANGER_FLAG = "--dangerously-serve-without-auth"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def refuse_bind(settings: AuthSettings, host: str, *, dangerously_public: bool) -> str | None:
    """Why ``host`` may not be used with ``settings`` (None: it may)."""
    if settings.mode != "none" or is_loopback(host) or dangerously_public:
        return None
    return (
        f"refusing to listen on {host}: with auth mode 'none' anyone who can reach this "
        "address would act as you (your conversations, memories, and tools such as shell). "
        'Set [auth] mode = "keys" or "oidc" (see docs/auth.md), listen on 127.0.0.1, '
        f"or, if the network is yours alone, start with {DANGER_FLAG}"
    )


def allowed_hosts(
    settings: AuthSettings, host: str, *, dangerously_public: bool
) -> frozenset[str] | None:
    """The ``Host`` names the server answers to: in mode ``none`` on a loopback address,
    only loopback names (a page that rebinds its own name to 127.0.0.1 cannot read the
    server); otherwise any."""
    if settings.mode == "none" and not dangerously_public and is_loopback(host):
        return LOOPBACK_NAMES
    return None
