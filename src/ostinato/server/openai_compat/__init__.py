"""The OpenAI-compatible surface: ``POST /v1/chat/completions`` answered by an agent.

``wire`` reads and writes OpenAI's format, ``continuity`` finds the conversation a request
continues, ``translate`` turns a turn's frames into what the completion says, ``chunks``
into a stream's bytes, and ``route`` puts them together. It reaches the loop only
through the runtime, as every other surface does.
"""

from ostinato.server.openai_compat.route import router

__all__ = ["router"]
