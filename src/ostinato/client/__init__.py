"""A typed Python client of an ostinato server (httpx): ``Client`` (blocking) and
``AsyncClient`` (asyncio), the same operations on each.

Frames come back as the dataclasses of ``ostinato.frames`` (rows as
``ostinato.messages.Message``), parsed from the JSON the server sends; errors as the
exceptions below (their tree is in ``_errors``). See docs/clients.md.

::

    from ostinato.client import Client

    with Client("http://127.0.0.1:8000", key=KEY) as client:
        conversation = client.create_conversation(title="Sums")
        for frame in client.stream(conversation.id, "What is 6*7?"):
            ...
"""

from ostinato.client._async import AsyncClient
from ostinato.client._calls import Conversation, EventCursor, FileLike, TurnResult
from ostinato.client._errors import (
    APIError,
    Conflict,
    Forbidden,
    InvalidRequest,
    NotFound,
    OstinatoClientError,
    RateLimited,
    ServerError,
    TooLarge,
    TransportError,
    Unauthorized,
)
from ostinato.client._frames import UnknownFrame, frame_from_json, message_from_json
from ostinato.client._sync import Client

__all__ = [
    "APIError",
    "AsyncClient",
    "Client",
    "Conflict",
    "Conversation",
    "EventCursor",
    "FileLike",
    "Forbidden",
    "InvalidRequest",
    "NotFound",
    "OstinatoClientError",
    "RateLimited",
    "ServerError",
    "TooLarge",
    "TransportError",
    "TurnResult",
    "Unauthorized",
    "UnknownFrame",
    "frame_from_json",
    "message_from_json",
]
