"""A response's typed events, numbered so that a stream can be resumed. Pure.

``EventLog`` is told what happened in a response, step by step (a message opens, text
arrives, it closes; a tool call runs, it ends; an approval is asked; the response
ends), keeps the output items, and answers each step with its events: the Responses
API's ``response.*`` events, each with its ``sequence_number``. The same steps give the
same numbers whoever drives the log: the live stream (``live``, from frames) and the
replay from the store (``replay``, from rows), so ``starting_after`` means the same
event on both.

Every event but a text delta is a *step event* and takes the next slot: its number is
``slot * STRIDE``. A text delta is numbered inside the slot of the ``content_part.added``
before it, by how far into the text it reaches: ``part + characters so far``. Live
deltas and the one delta a replay makes of a stored text therefore end on the same
numbers, and a stream resumed ``starting_after`` a delta's number gets the rest of the
text from that character on (``after``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from typing import Any, Literal

from ostinato.messages import JSON

STRIDE = 1 << 20
SERVER_LABEL = "ostinato"
Status = Literal["queued", "in_progress", "completed", "failed", "cancelled", "incomplete"]
TERMINAL: dict[str, str] = {
    "completed": "response.completed",
    "failed": "response.failed",
    "incomplete": "response.incomplete",
    "cancelled": "response.incomplete",  # the API has no stream event of its own for it
}


@dataclass(frozen=True, slots=True)
class Event:
    number: int
    data: JSON

    def encode(self) -> bytes:
        text = json.dumps(self.data, ensure_ascii=False, separators=(",", ":"))
        return f"event: {self.data['type']}\ndata: {text}\n\n".encode()


@dataclass(frozen=True, slots=True)
class Delta:
    """A text delta: ``number`` is where its text ends, ``number - len(text)`` where it
    begins."""

    number: int
    item_id: str
    output_index: int
    text: str

    def encode(self) -> bytes:
        return (
            'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
            f'"sequence_number":{self.number},"item_id":"{self.item_id}",'
            f'"output_index":{self.output_index},"content_index":0,'
            f'"delta":{encode_basestring(self.text)},"logprobs":[]}}\n\n'
        ).encode()

    def after(self, number: int) -> Delta | None:
        """What of this delta comes after event ``number``: all, its tail, or nothing."""
        if self.number <= number:
            return None
        begins = self.number - len(self.text)
        if begins >= number:
            return self
        return Delta(self.number, self.item_id, self.output_index, self.text[number - begins :])


AnyEvent = Event | Delta


def after(events: Iterable[AnyEvent], number: int | None) -> Iterator[AnyEvent]:
    """The events (or parts of them) after event ``number`` (``None``: all)."""
    for event in events:
        if number is None:
            yield event
        elif isinstance(event, Delta):
            tail = event.after(number)
            if tail is not None:
                yield tail
        elif event.number > number:
            yield event


@dataclass(slots=True)
class _Text:
    item_id: str
    index: int
    part: int  # the number of its content_part.added
    text: str = ""
    head: str = ""  # a delta event's text before its number (``EventLog.delta_bytes``)
    middle: str = ""  # between its number and its text

    def __post_init__(self) -> None:
        self.head = (
            'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
            '"sequence_number":'
        )
        self.middle = (
            f',"item_id":"{self.item_id}","output_index":{self.index},"content_index":0,"delta":'
        )


@dataclass(slots=True)
class EventLog:
    """The events and output items of one response (see the module's docstring).
    ``envelope`` makes the response object the lifecycle events carry."""

    response_id: str
    envelope: Any  # (status, output, extra) -> the response JSON; see ``wire.envelope``
    slot: int = 0
    output: list[JSON] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)  # tool_use id -> output index
    text: _Text | None = None
    status: Status = "in_progress"
    final: JSON | None = None  # the response object of the last lifecycle event

    def _next(self, data: JSON) -> Event:
        data["sequence_number"] = number = self.slot * STRIDE
        self.slot += 1
        return Event(number, data)

    def _response(self, kind: str, extra: JSON | None = None) -> Event:
        self.final = body = self.envelope(self.status, self.output, extra or {})
        return self._next({"type": kind, "response": body})

    def begin(self, queued: bool) -> list[AnyEvent]:
        """``response.created``, then ``response.queued`` or ``response.in_progress``."""
        self.status = "queued" if queued else "in_progress"
        first = self._response("response.created")
        return [first, self._response("response.queued" if queued else "response.in_progress")]

    def started(self) -> list[AnyEvent]:
        """A queued response's turn began."""
        if self.status != "queued":
            return []
        self.status = "in_progress"
        return [self._response("response.in_progress")]

    def _add(self, item: JSON) -> Event:
        self.output.append(item)
        index = len(self.output) - 1
        return self._next(
            {"type": "response.output_item.added", "output_index": index, "item": dict(item)}
        )

    def _done(self, index: int) -> Event:
        return self._next(
            {
                "type": "response.output_item.done",
                "output_index": index,
                "item": dict(self.output[index]),
            }
        )

    # --- text ------------------------------------------------------------------------

    def open_text(self) -> list[AnyEvent]:
        if self.text is not None:
            return []
        index = len(self.output)
        item_id = f"msg_{self.response_id.removeprefix('resp_')}_{index}"
        item = {
            "id": item_id,
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        added = self._add(item)
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        opened = self._next(
            {
                "type": "response.content_part.added",
                "item_id": item_id,
                "output_index": index,
                "content_index": 0,
                "part": part,
            }
        )
        self.text = _Text(item_id, index, opened.number)
        return [added, opened]

    def delta_bytes(self, text: str) -> bytes | None:
        """The encoded event of a text delta while the message is open (most frames of
        a stream), the same bytes as ``Delta.encode``'s, made without the objects;
        ``None`` when the delta needs more (no message open yet, no text)."""
        current = self.text
        if current is None or not text:
            return None
        current.text += text
        number = current.part + min(len(current.text), STRIDE - 1)
        return (
            f'{current.head}{number}{current.middle}{encode_basestring(text)},"logprobs":[]}}\n\n'
        ).encode()

    def delta(self, text: str) -> list[AnyEvent]:
        current = self.text
        if current is not None and text:  # most deltas: the message is open
            current.text += text
            number = current.part + min(len(current.text), STRIDE - 1)
            return [Delta(number, current.item_id, current.index, text)]
        if not text:
            return []
        out = self.open_text()
        current = self.text
        assert current is not None
        current.text += text
        number = current.part + min(len(current.text), STRIDE - 1)
        out.append(Delta(number, current.item_id, current.index, text))
        return out

    def close_text(self, final: str | None = None) -> list[AnyEvent]:
        """The message ends; ``final`` is its stored text (it wins over what streamed)."""
        current = self.text
        if current is None:
            if not final:
                return []
            out = self.delta(final)
            current = self.text
            assert current is not None
        else:
            out = []
        self.text = None
        text = current.text if final is None else final
        where = {"item_id": current.item_id, "output_index": current.index, "content_index": 0}
        part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        self.output[current.index] = {
            **self.output[current.index],
            "status": "completed",
            "content": [part],
        }
        out.append(
            self._next({"type": "response.output_text.done", **where, "text": text, "logprobs": []})
        )
        out.append(self._next({"type": "response.content_part.done", **where, "part": part}))
        out.append(self._done(current.index))
        return out

    # --- tool calls and approvals ----------------------------------------------------

    def tool_call(
        self, call_id: str, name: str, arguments: JSON, approval: str | None = None
    ) -> list[AnyEvent]:
        """A call of one of the agent's tools is running (an ``mcp_call``)."""
        if call_id in self.calls:
            return []
        out = self.close_text()
        args = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
        item = {
            "id": f"mcp_{call_id}",
            "type": "mcp_call",
            "server_label": SERVER_LABEL,
            "name": name,
            "arguments": args,
            "status": "in_progress",
            "output": None,
            "error": None,
            "approval_request_id": approval_item_id(approval) if approval else None,
        }
        out.append(self._add(item))
        self.calls[call_id] = index = len(self.output) - 1
        where = {"item_id": item["id"], "output_index": index}
        out.append(
            self._next({"type": "response.mcp_call_arguments.done", **where, "arguments": args})
        )
        out.append(self._next({"type": "response.mcp_call.in_progress", **where}))
        return out

    def tool_result(self, call_id: str, output: str, failed: bool) -> list[AnyEvent]:
        index = self.calls.get(call_id)
        if index is None or self.output[index]["status"] != "in_progress":
            return []
        item = self.output[index]
        if failed:
            error = {"type": "mcp_tool_execution_error", "content": output}
            self.output[index] = {**item, "status": "failed", "error": error}
        else:
            self.output[index] = {**item, "status": "completed", "output": output}
        kind = "response.mcp_call.failed" if failed else "response.mcp_call.completed"
        ended = self._next({"type": kind, "item_id": item["id"], "output_index": index})
        return [ended, self._done(index)]

    def approval_request(self, approval_id: str, name: str, arguments: JSON) -> list[AnyEvent]:
        """A call waits for a person's approval: an ``mcp_approval_request`` whose id an
        ``mcp_approval_response`` names."""
        out = self.close_text()
        args = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
        item = {
            "id": approval_item_id(approval_id),
            "type": "mcp_approval_request",
            "server_label": SERVER_LABEL,
            "name": name,
            "arguments": args,
        }
        out.append(self._add(item))
        out.append(self._done(len(self.output) - 1))
        return out

    def say(self, text: str) -> list[AnyEvent]:
        """A whole message at once (a question card's words)."""
        return [*self.close_text(), *self.close_text(text)]

    # --- the end ---------------------------------------------------------------------

    def current(self) -> JSON:
        """The response as it is now (once ended, as its last event said)."""
        if self.ended and self.final is not None:
            return self.final
        return self.envelope(self.status, self.output, {})  # type: ignore[no-any-return]

    @property
    def ended(self) -> bool:
        return self.status not in ("queued", "in_progress")

    def finish(self, status: Status, extra: JSON | None = None) -> list[AnyEvent]:
        if self.ended:
            return []
        out = self.close_text()
        self.status = status
        out.append(self._response(TERMINAL.get(status, "response.completed"), extra))
        return out


APPROVAL_PREFIX = "mcpr_"


def approval_item_id(approval_id: str) -> str:
    return APPROVAL_PREFIX + approval_id


def approval_of_item(item_id: str) -> str:
    """The ostinato approval an ``mcp_approval_request`` item id names."""
    return item_id.removeprefix(APPROVAL_PREFIX)


def encode(events: Iterable[AnyEvent]) -> bytes:
    return b"".join(event.encode() for event in events)
