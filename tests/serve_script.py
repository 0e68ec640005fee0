"""``ostinato serve`` run by a script in a child Python (``script`` gets the port as its
first argument, then ``args``), on the offline model with no provider or ostinato
settings from the environment: for tests that look inside a real server process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path


def run_serve_script(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The finished child (its output as text); the script must end the server itself."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OSTINATO_", "OPENAI_"))}
    env.pop("ANTHROPIC_API_KEY", None)
    env["OSTINATO_MODEL"] = "offline:ostinato"
    return subprocess.run(
        [sys.executable, "-c", script, str(port), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
