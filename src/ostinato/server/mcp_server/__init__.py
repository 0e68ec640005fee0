"""ostinato as an MCP server: ``/mcp`` offers each agent as a tool (``route``: the SDK's
server, stateless, behind the API's authentication; ``calls``: a call as a turn).
Nothing is kept in the process: a conversation named by a call is read from the store."""

from ostinato.server.mcp_server.route import load, router

__all__ = ["load", "router"]
