"""Tools from MCP servers, through the official ``mcp`` SDK (2.x).

``mcp_tools(config, cache=..., clients=...)`` lists a server's tools and wraps each as an
ostinato ``Tool``: its name sanitised (and prefixed with the server's name unless the
configuration says not to), its description, its input schema (validated with
``jsonschema`` before a call). Calling it calls the tool on the server; an ``isError``
result or a failure is a ``ToolError``; text content is joined, structured content is
returned as JSON.

- **Listings are cached** in a ``McpToolCache`` for ten minutes per (owner, server):
  ``owner`` is ``None`` for a server configured for everyone, the user's id for one
  configured per user.
- **Sessions stay open** in a ``McpClients`` manager, one per (owner, server), reused by
  every call; the server closes them with ``aclose()`` at shutdown. Each session lives in
  its own task, since the SDK's transports are anyio task groups that must be entered and
  left by one task.
- **A dead session is reopened once.** A session seen closed (the process died, the HTTP
  session ended) is reopened before the next call; a session idle for 30 s is probed
  first (``server/discover``, or ``ping`` on older protocol versions). A call that loses
  its connection half-way is repeated on a fresh session only when the server marks the
  tool read-only or idempotent: otherwise the model is told it may or may not have run.
- **Risk** comes from the server's annotations, which are hints: a read-only tool is a
  ``read`` with risk ``network``; any other is an ``action`` with risk ``write`` (so an
  approval policy asks), unless the configuration sets a risk for the server's tools.

Modules: ``server`` (a server's configuration, the listing cache), ``sessions`` (open
sessions and calls over them), ``tools`` (MCP tools as ostinato tools), ``pinned`` (a
person's server reached only at the addresses that were vetted). The SDK is
imported with this package, which the deployment imports only when MCP servers are
configured.
"""

from ostinato.tools.mcp.pinned import AddressGuard, PinnedTransport
from ostinato.tools.mcp.server import (
    CALL_TIMEOUT,
    CONNECT_TIMEOUT,
    IDLE_PING,
    LISTING_TTL,
    McpServerConfig,
    McpServerUnavailable,
    McpToolCache,
)
from ostinato.tools.mcp.sessions import McpClients
from ostinato.tools.mcp.tools import mcp_tools, result_value, wrap_tool

__all__ = [
    "CALL_TIMEOUT",
    "CONNECT_TIMEOUT",
    "IDLE_PING",
    "LISTING_TTL",
    "AddressGuard",
    "McpClients",
    "McpServerConfig",
    "McpServerUnavailable",
    "McpToolCache",
    "PinnedTransport",
    "mcp_tools",
    "result_value",
    "wrap_tool",
]
