"""Forged tools: tools a person (or their agent) writes as one JavaScript function.

The code runs in ``Sandbox`` (``pool.py``): QuickJS, an embedded JavaScript engine, in
worker processes started with an empty environment, under limits the engine enforces
(``limits.py``). The only way out of the sandbox is ``fetch``, served by ostinato's
SSRF-safe fetcher, and only for code that uses it.
"""

from ostinato.tools.forge.limits import CODE_LIMIT, Limits, SandboxError, check_code_size
from ostinato.tools.forge.pool import Sandbox

__all__ = ["CODE_LIMIT", "Limits", "Sandbox", "SandboxError", "check_code_size"]
