"""``Client``: the API over a blocking ``httpx.Client``."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

import httpx

from ostinato.client import _calls as calls
from ostinato.client._calls import (
    Call,
    Conversation,
    EventCursor,
    FileLike,
    FrameReader,
    TurnResult,
)
from ostinato.client._errors import TransportError
from ostinato.client._frames import UnknownFrame
from ostinato.frames import Frame, TurnFinished
from ostinato.messages import JSON, Message

T = TypeVar("T")
TIMEOUT = httpx.Timeout(10.0, read=None)  # a turn may wait behind another, a stream idles


class Client:
    """A blocking client of an ostinato server. ``key`` is an API key (auth mode
    ``keys``) or a token; every method raises an ``APIError`` subclass for an error
    answer and ``TransportError`` when the server cannot be reached."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        key: str | None = None,
        timeout: httpx.Timeout | float = TIMEOUT,
        http: httpx.Client | None = None,
    ) -> None:
        headers = {"authorization": f"Bearer {key}"} if key else {}
        self.http = http or httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout)
        self.http.headers.update(headers)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def _do(self, call: Call[T]) -> T:
        try:
            response = self.http.request(
                call.method,
                call.path,
                json=call.json,
                params=call.params,
                data=call.data,
                files=call.files,
                headers=call.headers,
            )
        except httpx.TransportError as exc:
            raise TransportError(str(exc)) from exc
        return call.result(response.status_code, response.content, response.headers)

    # --- conversations ---------------------------------------------------------------

    def create_conversation(
        self, *, title: str | None = None, metadata: JSON | None = None
    ) -> Conversation:
        return self._do(calls.create_conversation(title, metadata))

    def list_conversations(
        self, *, limit: int = 50, before: str | None = None
    ) -> tuple[list[Conversation], str | None]:
        """A page, newest first, and the cursor of the next (older) page."""
        return self._do(calls.list_conversations(limit, before))

    def conversation(self, conversation_id: str) -> Conversation:
        return self._do(calls.get_conversation(conversation_id))

    def update_conversation(self, conversation_id: str, **fields: Any) -> Conversation:
        """Change its ``title``, ``metadata``, ``persona`` or ``model`` (``None`` clears)."""
        return self._do(calls.update_conversation(conversation_id, fields))

    def turns(self, conversation_id: str) -> list[JSON]:
        """Its turns, oldest first: how each ended, and their metrics."""
        return self._do(calls.turns(conversation_id))

    def models(self) -> list[JSON]:
        """``GET /v1/models``: the agents, then the models."""
        return self._do(calls.models())

    def messages(
        self, conversation_id: str, *, after_seq: int = 0, include_hidden: bool = False
    ) -> list[Message]:
        return self._do(calls.messages(conversation_id, after_seq, include_hidden))

    # --- turns -------------------------------------------------------------------------

    def send(
        self, conversation_id: str, text: str, *, files: Sequence[FileLike] = (), **fields: Any
    ) -> TurnResult:
        """Send a message and wait for its turn's end. ``fields``: ``policy``,
        ``client_message_id``, ``agent``, ``instructions``."""
        return self._do(calls.turn(conversation_id, text, files=files, **fields))

    def stream(
        self, conversation_id: str, text: str, *, files: Sequence[FileLike] = (), **fields: Any
    ) -> Iterator[Frame | UnknownFrame]:
        """Send a message and yield its turn's frames, up to ``turn.finished``."""
        call = calls.turn(conversation_id, text, files=files, stream=True, **fields)
        yield from self._frames(call)

    def answer_card(self, conversation_id: str, tool_use_id: str, result: Any) -> TurnResult:
        """Answer the question card that waits; the turn goes on (its result)."""
        answer = {"tool_use_id": tool_use_id, "result": result}
        return self._do(calls.turn(conversation_id, None, tool_response=answer))

    def stream_answer(
        self, conversation_id: str, tool_use_id: str, result: Any
    ) -> Iterator[Frame | UnknownFrame]:
        """Answer the question card that waits, and yield the frames of the turn that
        goes on."""
        answer = {"tool_use_id": tool_use_id, "result": result}
        yield from self._frames(calls.turn(conversation_id, None, tool_response=answer))

    # --- the tree: versions of a message, answers given again, branches ---------------

    def edit(
        self,
        conversation_id: str,
        seq: int,
        text: str,
        *,
        files: Sequence[FileLike] = (),
        **fields: Any,
    ) -> TurnResult:
        """A new version of user message ``seq``, answered on a new branch (now current)."""
        at = f"messages/{seq}/edit"
        return self._do(calls.turn(conversation_id, text, files=files, at=at, **fields))

    def stream_edit(
        self, conversation_id: str, seq: int, text: str, **fields: Any
    ) -> Iterator[Frame | UnknownFrame]:
        """``edit``, yielding the turn's frames (``branch.changed`` first after its start)."""
        at = f"messages/{seq}/edit"
        yield from self._frames(calls.turn(conversation_id, text, stream=True, at=at, **fields))

    def regenerate(self, conversation_id: str, seq: int, **fields: Any) -> TurnResult:
        """A new answer in place of answer ``seq`` (``agent``, ``model``, ``instructions``)."""
        return self._do(calls.regenerate(conversation_id, seq, **fields))

    def stream_regenerate(
        self, conversation_id: str, seq: int, **fields: Any
    ) -> Iterator[Frame | UnknownFrame]:
        yield from self._frames(calls.regenerate(conversation_id, seq, stream=True, **fields))

    def branches(self, conversation_id: str) -> JSON:
        """``GET .../branches``: the leaves, oldest first, and the current one."""
        return self._do(calls.branches(conversation_id))

    def switch_branch(self, conversation_id: str, leaf: int) -> JSON:
        """Make the branch that ends at row ``leaf`` current."""
        return self._do(calls.switch_branch(conversation_id, leaf))

    def cancel(self, conversation_id: str) -> JSON:
        return self._do(calls.cancel(conversation_id))

    # --- people in the loop ------------------------------------------------------------

    def approvals(self, conversation_id: str, *, pending: bool = False) -> list[JSON]:
        return self._do(calls.approvals(conversation_id, pending))

    def decide(
        self,
        conversation_id: str,
        approval_id: str,
        *,
        approve: bool,
        remember: str = "none",
        expires_in_s: float | None = None,
    ) -> JSON:
        return self._do(calls.decide(conversation_id, approval_id, approve, remember, expires_in_s))

    # --- memory ------------------------------------------------------------------------

    def memories(self, *, query: str | None = None, limit: int = 50) -> list[JSON]:
        return self._do(calls.memories(query, limit))

    def remember(self, fact: str, *, subject: str | None = None) -> JSON:
        return self._do(calls.remember(fact, subject))

    def forget(self, memory_id: str) -> JSON:
        return self._do(calls.forget(memory_id))

    # --- streams -----------------------------------------------------------------------

    def events(
        self, conversation_id: str, *, after_seq: int = 0, deltas: bool = True
    ) -> Iterator[Frame | UnknownFrame]:
        """The conversation's rows after ``after_seq``, then its live frames, for as long
        as the caller iterates. A stream the server ends (``closing``, ``overflow``) or a
        broken connection is opened again from the last row seen (``Last-Event-ID``)."""
        cursor = EventCursor(after_seq)
        path, params = calls.events_path(conversation_id, deltas)
        while True:
            call: Call[None] = Call("GET", path, lambda _: None, params=params)
            call.headers.update(cursor.headers())
            try:
                for frame in self._frames(call, until_finished=False):
                    if not cursor.see(frame):
                        break
                    yield frame
            except TransportError:
                if cursor.exhausted:
                    raise
            time.sleep(cursor.backoff())

    def _frames(
        self, call: Call[Any], *, until_finished: bool = True
    ) -> Iterator[Frame | UnknownFrame]:
        reader = FrameReader()
        try:
            with self.http.stream(
                call.method,
                call.path,
                json=call.json,
                params=call.params,
                data=call.data,
                files=call.files,
                headers={**calls.SSE, **call.headers},
            ) as response:
                if response.status_code != 200:
                    response.read()
                    raise calls.stream_error(
                        response.status_code, response.content, response.headers
                    )
                for text in response.iter_text():
                    for frame in reader.feed(text):
                        yield frame
                        if until_finished and isinstance(frame, TurnFinished):
                            return
        except httpx.TransportError as exc:
            raise TransportError(str(exc)) from exc
