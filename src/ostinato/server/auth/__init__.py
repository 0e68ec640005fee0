"""Who is calling: the HTTP side of identity.

- ``middleware``: resolves every request and WebSocket to a caller, first;
- ``authenticator``: credentials to a caller, by the ``[auth]`` mode;
- ``oidc``: JWT access tokens against an issuer's published keys;
- ``cookies``: the anonymous cookie, the session cookie and the CSRF token;
- ``signin``: the chat page's sign-in (an API key, or the code flow with PKCE) to a session;
- ``caller``: the ``Caller`` and the ``CurrentCaller`` dependency routes take;
- ``ownership``: another owner's conversation answers like a missing one;
- ``guard``: open streams, their limit, and closing them when a key is revoked.
"""

from ostinato.server.auth.caller import Caller, CurrentCaller
from ostinato.server.auth.ownership import owned

__all__ = ["Caller", "CurrentCaller", "owned"]
