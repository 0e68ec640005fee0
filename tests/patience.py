"""How long a test waits for a server it started: long enough for the machine it runs on.

A fixed 60 s was too short on a shared 2-core machine at load 20-35 (eight e2e start-ups
timed out there) and needlessly long to notice a server that will never answer on a quiet
one. The wait is 60 s times the machine's load per core (at least 1, at most 10), read
when the server starts; ``OSTINATO_TEST_START_TIMEOUT`` (seconds) sets it outright.
"""

from __future__ import annotations

import os

BASE_S = 60.0
MAX_FACTOR = 10.0
VARIABLE = "OSTINATO_TEST_START_TIMEOUT"


def start_timeout(
    environ: dict[str, str] | None = None,
    load: float | None = None,
    cores: int | None = None,
) -> float:
    """Seconds to wait for a started server's first ``/healthz``."""
    given = (os.environ if environ is None else environ).get(VARIABLE)
    if given:
        return float(given)
    load = os.getloadavg()[0] if load is None else load
    cores = (os.cpu_count() or 1) if cores is None else cores
    factor = min(MAX_FACTOR, max(1.0, load / cores))
    return BASE_S * factor
