"""Identifiers: random, URL-safe, sortable enough to page by."""

from __future__ import annotations

import os
import time


def new_id() -> str:
    """A 27-character id: 11 hex digits of milliseconds, then 16 random hex digits.

    Ids made later sort later (to the millisecond), which keyset pagination relies on.
    """
    return f"{int(time.time() * 1000):011x}{os.urandom(8).hex()}"
