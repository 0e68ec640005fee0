"""A Server-Sent Events decoder for the terminal client (the WHATWG parsing rules)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ServerEvent:
    event: str | None
    data: str | None  # the data lines joined by "\n"; None for an event with no data
    id: str | None


class SSEDecoder:
    """Feed text as it arrives; get back the events it completes."""

    def __init__(self) -> None:
        self._partial = ""
        self._event: str | None = None
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, text: str) -> list[ServerEvent]:
        text = self._partial + text
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self._partial = lines.pop()  # the last piece has no line end yet
        events: list[ServerEvent] = []
        for line in lines:
            if not line:
                if self._data or self._event is not None:
                    data = "\n".join(self._data) if self._data else None
                    events.append(ServerEvent(self._event, data, self._id))
                self._event, self._data = None, []
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                self._field(name, value.removeprefix(" "))
        return events

    def _field(self, name: str, value: str) -> None:
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
