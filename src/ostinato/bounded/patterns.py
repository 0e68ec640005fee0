"""Regular expressions from outside, run in RE2 (linear in the text's length).

Python's ``re`` backtracks: ``^(a+)+$`` against 30 ``a``s and a ``!`` runs for minutes
and holds the interpreter (no thread helps: the matcher never lets go of it). RE2 runs
any pattern it accepts in time linear in the text, and refuses the constructs that need
backtracking (back-references, look-around), so a pattern from a caller, a model or a
remote server is compiled here or refused.
"""

from __future__ import annotations

import functools
from typing import Any

import re2

from ostinato.errors import InvalidRequest

MAX_PATTERN = 1_000  # characters of one pattern


class PatternRefused(InvalidRequest):
    """The pattern is not one the linear-time engine runs (or is too long)."""

    code = "pattern_refused"


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is the caller's, not the server's log's
    options.max_mem = 8 << 20  # the compiled program's memory: a bound on its size
    return options


@functools.lru_cache(maxsize=1024)
def compiled(pattern: str) -> Any:
    """The RE2 program of ``pattern``; ``PatternRefused`` when RE2 cannot run it."""
    if len(pattern) > MAX_PATTERN:
        raise PatternRefused(
            f"a pattern is at most {MAX_PATTERN:,} characters, not {len(pattern):,}"
        )
    try:
        return re2.compile(pattern, options=_options())
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise PatternRefused(
            f"the pattern {pattern[:80]!r} is refused: {reason} (patterns run in a "
            "linear-time engine: no back-references or look-around)"
        ) from None


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches anywhere in ``text`` (JSON Schema's ``pattern``)."""
    return compiled(pattern).search(text) is not None
