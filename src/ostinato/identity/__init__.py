"""Identity without HTTP: owners, API keys, the ``[auth]`` settings and per-owner limits.

The server resolves callers (``ostinato.server.auth``); what it resolves them into, and
what the store keeps about them, is here, so the CLI (``ostinato keys``) and the runtime
use it without the web framework.
"""

from ostinato.identity.owners import LOCAL_OWNER, is_anonymous
from ostinato.identity.settings import AuthSettings, LimitSettings, OidcSettings

__all__ = ["LOCAL_OWNER", "AuthSettings", "LimitSettings", "OidcSettings", "is_anonymous"]
