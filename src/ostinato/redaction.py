"""Secrets out of error text: every error ostinato stores or returns passes through here.

A provider or a gateway may echo what it was sent (``invalid x-api-key: sk-...``), and an
error message travels far: into the turn's row, ``error`` and ``turn.finished`` frames,
JSON results, retry frames and logs. ``redact`` replaces, in this order:

1. the known secrets: every value given to ``register_secret`` (the deployment's keys,
   registered when a model is built from them; the identity work adds its own), and the
   ones a caller passes for this text alone (``redact(text, caller_key)``), so a caller's
   key is never kept in the process-wide set;
2. credentials in URLs (``https://user:password@host``) and after an ``Authorization``
   scheme (``Bearer ...``, ``Basic ...``);
3. the value after a name that says it is secret (``x-api-key: ...``, ``api_key=...``,
   ``token=...``, ``password: ...``, ``API key provided: ...``);
4. anything shaped like a key: the prefixes providers give their keys (``sk-``,
   ``sk-ant-``, ``gsk_``, ``xai-``, ``hf_``, ``ghp_``, ``AIza``, ``AKIA``, JWTs), and any
   run of 32 or more letters and digits that mixes upper case, lower case and digits (a
   random key; ostinato's own ids and hex digests are lower case, so they stay).

Each secret becomes ``[redacted]``; the rest of the text, the provider's error code
included, is kept so the error still says what went wrong. Secrets shorter than
``MIN_SECRET`` characters are not registered (replacing every ``k`` would ruin the text
and protect nothing).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

REDACTED = "[redacted]"
MIN_SECRET = 8

_known: set[str] = set()
_lock = threading.Lock()
_known_pattern: re.Pattern[str] | None = None

_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/@:]+:[^\s/@]+@")
_AUTH_SCHEME = re.compile(r"\b(?i:(bearer)|(basic))(\s+)([A-Za-z0-9._~+/=-]{6,})")
_NAMED = re.compile(
    r"(?i)\b((?:x-)?api[-_ ]?key|access[-_ ]?token|auth[-_ ]?token|refresh[-_ ]?token|"
    r"client[-_ ]?secret|secret|password|passwd|token|authorization|key provided)"
    r"([\"']?\s*[:=]\s*[\"']?)([^\s\"',;&)}\]]+)"
)
_PREFIXED = re.compile(
    r"\b(?:sk-ant-[A-Za-z0-9_-]{8,}|sk-[A-Za-z0-9_*-]{8,}|(?:pk|rk)-[A-Za-z0-9_-]{16,}"
    r"|gsk_[A-Za-z0-9]{16,}|xai-[A-Za-z0-9]{16,}|hf_[A-Za-z0-9]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}|AIza[0-9A-Za-z_-]{20,}"
    r"|AKIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"
)
_LONG_TOKEN = re.compile(r"[A-Za-z0-9]{32,}")


def register_secret(value: str | None) -> None:
    """Add a secret that must never appear in an error (a key, a token, a password)."""
    global _known_pattern
    if not value or len(value) < MIN_SECRET:
        return
    with _lock:
        if value not in _known:
            _known.add(value)
            _known_pattern = None


def forget_secret(value: str) -> None:
    """Remove a registered secret (e.g. a revoked key)."""
    global _known_pattern
    with _lock:
        if value in _known:
            _known.discard(value)
            _known_pattern = None


def redact(text: str, also: Iterable[str | None] = ()) -> str:
    """``text`` with every secret replaced by ``[redacted]``; ``also`` adds secrets for
    this text alone (a caller's key)."""
    if not text:
        return text
    for secret in sorted((s for s in also if s and len(s) >= MIN_SECRET), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    known = _pattern()
    if known is not None:
        text = known.sub(REDACTED, text)
    text = _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    text = _AUTH_SCHEME.sub(_scheme, text)
    text = _NAMED.sub(_named, text)
    text = _PREFIXED.sub(REDACTED, text)
    return _LONG_TOKEN.sub(_long_token, text)


def _pattern() -> re.Pattern[str] | None:
    global _known_pattern
    with _lock:
        if _known_pattern is None and _known:
            ordered = sorted(_known, key=len, reverse=True)  # a longer secret wins
            _known_pattern = re.compile("|".join(re.escape(s) for s in ordered))
        return _known_pattern


def _scheme(match: re.Match[str]) -> str:
    bearer, basic, space, value = match.groups()
    if basic and not _looks_encoded(value):  # "basic information", not a credential
        return match.group(0)
    return f"{bearer or basic}{space}{REDACTED}"


def _looks_encoded(value: str) -> bool:
    return sum(c.isupper() for c in value) >= 2 or any(c in "0123456789+/=" for c in value)


def _named(match: re.Match[str]) -> str:
    value = match.group(3)
    if value.startswith(REDACTED) or value.lower() in ("bearer", "basic"):
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}{REDACTED}"


def _long_token(match: re.Match[str]) -> str:
    token = match.group(0)
    mixed = (
        any(c.isupper() for c in token)
        and any(c.islower() for c in token)
        and any(c.isdigit() for c in token)
    )
    return REDACTED if mixed else token
