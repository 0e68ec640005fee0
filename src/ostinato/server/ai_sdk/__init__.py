"""The AI SDK surface: ``POST /v1/ai-sdk/chat`` answers ``useChat`` with the UI message
stream (``translate``: frames to chunks; ``route``: the request, the conversation, the
answers it carries). It reaches the loop only through the runtime."""

from ostinato.server.ai_sdk.route import router

__all__ = ["router"]
