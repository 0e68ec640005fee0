"""Helpers for the people-in-the-loop HTTP tests: a model that waits for the test, a
tool that needs consent, and waiting on state without clocks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import httpx
from fastapi import FastAPI

from ostinato.messages import JSON
from ostinato.models.base import ModelEvent, ModelRequest, Stop, TextDelta, Usage
from ostinato.store.base import Store, Turn
from ostinato.tools.base import Tool
from ostinato.tools.functions import function_tool
from tests.server.sse_client import Stream, open_stream

SSE = {"accept": "text/event-stream", "content-type": "application/json"}


class GatedModel:
    """Streams ``working `` then waits until its call is let through (``open``) before
    it ends its reply: a turn that is certainly running, and streaming, while the test
    acts."""

    name = "gated:model"

    def __init__(self) -> None:
        self.calls = 0
        self._gates: dict[int, asyncio.Event] = {}
        self._all_open = False

    def _gate(self, call: int) -> asyncio.Event:
        return self._gates.setdefault(call, asyncio.Event())

    def open(self, *calls: int) -> None:
        """Let these calls (1 is the first) finish."""
        for call in calls:
            self._gate(call).set()

    def open_all(self) -> None:
        self._all_open = True
        for gate in self._gates.values():
            gate.set()

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        self.calls += 1
        call = self.calls
        yield TextDelta("working ")
        if not self._all_open:
            await self._gate(call).wait()
        yield TextDelta(f"done {call}")
        yield Usage(1, 1)
        yield Stop("end_turn")


def deploy_tool(runs: list[str]) -> Tool:
    async def deploy(target: str) -> str:
        """Deploy to a target.

        Args:
            target: Where to deploy.
        """
        runs.append(target)
        return f"deployed {target}"

    return function_tool(deploy, risk="exec", idempotent=False, family=lambda a: "deploy")


@asynccontextmanager
async def client_for(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        yield client


def sse_turn(app: FastAPI, cid: str, body: JSON) -> AbstractAsyncContextManager[Stream]:
    """``POST /turns`` with ``Accept: text/event-stream``, streamed as it comes."""
    raw = json.dumps(body).encode()
    return open_stream(app, "POST", f"/v1/conversations/{cid}/turns", headers=SSE, body=raw)


async def eventually(check: Callable[[], Awaitable[bool]], tries: int = 500) -> None:
    """Wait (yielding to the loop, not for a duration) until ``check`` is true."""
    for _ in range(tries):
        if await check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never became true")


async def last_turn(store: Store, cid: str) -> Turn:
    turns = sorted(await store.list_turns(cid), key=lambda t: t.started_at)
    return turns[-1]


async def turn_ended(store: Store, cid: str, count: int = 1) -> bool:
    turns = await store.list_turns(cid)
    return len(turns) >= count and all(t.status == "finished" for t in turns)
