"""OpenAI's Responses API: ``/v1/responses`` (and the same under ``/openai/v1``, the base
URL under which OpenAI's Conversations API is served too: ``conversations``).

``wire`` reads requests and writes the response object, ``acting`` decides which
conversation a request continues and what it starts there, ``events`` numbers the typed
events, ``steps`` makes them from a turn's frames or rows, ``record`` keeps a response in
the store, and ``route`` and ``reading`` serve them. It reaches the loop only through
the runtime, as every other surface does.
"""

from ostinato.server.responses.conversations import router as conversations_router
from ostinato.server.responses.route import make_router

BASES = ("/v1", "/openai/v1")
__all__ = ["BASES", "conversations_router", "make_router"]
