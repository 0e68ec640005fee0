"""The fan-out over Redis pub/sub (``server.redis_url``), for deployments that have Redis.

One client per process: it subscribes to one channel on a connection of its own and
publishes each batch of payloads with one pipeline, in order, on another; Redis hands a
channel's messages to each subscriber in the order it received them. Redis has no
payload limit worth the name (512 MB), so nothing is cut into parts. Pub/sub is not
scoped by database number: deployments sharing one Redis use different channels
(``server.fanout_channel``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis  # type: ignore[import-not-found,unused-ignore]

from ostinato.fanout_pg import CHANNEL


class RedisTransport:
    limit: int | None = None

    def __init__(self, url: str, *, channel: str = CHANNEL) -> None:
        self.url = url
        self.channel = channel
        self._client: Any = None
        self._listener: asyncio.Task[None] | None = None

    async def connect(
        self, received: Callable[[str], None], lost: Callable[[BaseException | None], None]
    ) -> None:
        await self.close()
        client = aioredis.Redis.from_url(self.url, decode_responses=True)
        pubsub: Any = client.pubsub()
        try:
            await pubsub.subscribe(self.channel)
            async with asyncio.timeout(10):
                while (await pubsub.get_message(timeout=1.0)) is None:
                    pass  # until the subscription is confirmed
        except BaseException:
            await pubsub.aclose()
            await client.aclose()
            raise
        self._client = client
        self._listener = asyncio.create_task(self._listen(pubsub, received, lost))

    async def _listen(
        self,
        pubsub: Any,
        received: Callable[[str], None],
        lost: Callable[[BaseException | None], None],
    ) -> None:
        try:
            async for message in pubsub.listen():
                if message.get("type") == "message":
                    received(message["data"])
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            lost(exc)
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()

    async def send(self, payloads: list[str]) -> None:
        if self._client is None:
            raise ConnectionError("the fan-out connection is not open")
        async with self._client.pipeline(transaction=False) as pipe:
            for payload in payloads:
                pipe.publish(self.channel, payload)
            await pipe.execute()

    async def close(self) -> None:
        listener, self._listener = self._listener, None
        client, self._client = self._client, None
        if listener is not None:
            listener.cancel()
            with contextlib.suppress(BaseException):
                await listener
        if client is not None:
            with contextlib.suppress(Exception):
                await client.aclose()
