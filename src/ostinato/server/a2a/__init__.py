"""The A2A surface (Agent2Agent, version 1.0, JSON-RPC binding): agent cards and tasks.

``wire`` reads and writes the JSON-RPC envelope and A2A's errors, ``card`` describes the
agents, ``reading`` finds tasks in the store (a task is an exchange: ``ostinato.
exchanges``), ``tasks`` shows one as A2A's ``Task``, ``updates`` turns its frames into
stream events, ``methods`` acts through the runtime, and ``route`` puts them together.
Nothing here keeps state of its own: every answer is read from the store and the bus.
"""

from ostinato.server.a2a.route import router

__all__ = ["router"]
