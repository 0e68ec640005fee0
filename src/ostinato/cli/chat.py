"""``ostinato chat``: a terminal chat against a running server.

It opens a conversation (or resumes one), reads lines from stdin and sends each as a turn
with ``Accept: text/event-stream``; the reply's text streams as it comes and every tool
step shows as a line. ``/quit`` or end of input leaves.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

import httpx

from ostinato.cli.sse import SSEDecoder

QUIT = frozenset({"/quit", "/exit"})
HISTORY_SHOWN = 10


class ChatError(Exception):
    """Something the user should read; the chat goes on or ends depending on what."""


class Renderer:
    """Writes frames to the terminal: text as it streams, one line per tool step."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.at_line_start = True
        self.streamed = False  # text.delta seen since the last assistant row
        self.quiet: set[str] = set()  # ``read`` tool calls: lookups, not shown

    def write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()
            self.at_line_start = text.endswith("\n")

    def line(self, text: str) -> None:
        if not self.at_line_start:
            self.write("\n")
        self.write(text + "\n")

    def frame(self, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind in ("tool.started", "tool.finished") and (
            frame.get("category") == "read" or frame.get("tool_use_id") in self.quiet
        ):
            self.quiet.add(str(frame.get("tool_use_id")))
            return
        show = _SHOWN.get(str(kind))
        if show is not None:
            show(self, frame)

    def _text_delta(self, frame: dict[str, Any]) -> None:
        self.write(str(frame.get("text", "")))
        self.streamed = True

    def _text_discarded(self, frame: dict[str, Any]) -> None:
        if self.streamed:
            self.line("  [the text above was not kept]")
        self.streamed = False

    def _tool_started(self, frame: dict[str, Any]) -> None:
        arguments = json.dumps(frame.get("input", {}), ensure_ascii=False)
        self.line(f"  [tool] {frame.get('name')} {_short(arguments)}")

    def _tool_finished(self, frame: dict[str, Any]) -> None:
        seconds = float(frame.get("duration_s") or 0.0)
        self.line(
            f"  [tool] {frame.get('name')} -> {frame.get('status')} ({seconds:.2f} s): "
            f"{_short(str(frame.get('result', '')))}"
        )

    def _model_retrying(self, frame: dict[str, Any]) -> None:
        self.line(f"  [model busy, retrying in {frame.get('delay_s')} s: {frame.get('error')}]")

    def _error(self, frame: dict[str, Any]) -> None:
        self.line(f"  [error] {frame.get('code')}: {frame.get('message')}")

    def _turn_finished(self, frame: dict[str, Any]) -> None:
        if not self.at_line_start:
            self.write("\n")
        note = _ending(frame)
        if note:
            self.line(note)

    def _message_frame(self, frame: dict[str, Any]) -> None:
        self._message(frame.get("message") or {})

    def _message(self, message: dict[str, Any]) -> None:
        """An assistant row whose text did not stream (some models do not) is shown whole."""
        if message.get("role") != "assistant":
            return
        if not self.streamed:
            self.write(_text(message))
        self.streamed = False


_SHOWN: dict[str, Callable[[Renderer, dict[str, Any]], None]] = {
    "text.delta": Renderer._text_delta,
    "text.discarded": Renderer._text_discarded,
    "tool.started": Renderer._tool_started,
    "tool.finished": Renderer._tool_finished,
    "message": Renderer._message_frame,
    "model.retrying": Renderer._model_retrying,
    "error": Renderer._error,
    "turn.finished": Renderer._turn_finished,
}
"""How each frame type shows in the terminal; the others do not show."""


def _ending(turn: dict[str, Any]) -> str | None:
    """The line for a turn that did not end with an answer (live, or after a reload)."""
    reason = turn.get("stop_reason")
    if reason in (None, "end_turn"):
        return None
    error = f": {turn['error']}" if turn.get("error") else ""
    return f"  [turn ended {reason}{error}]"


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _text(message: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in message.get("blocks", []) if b.get("type") == "text")


def _error(response: httpx.Response) -> ChatError:
    try:
        message = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = response.text[:200] or response.reason_phrase
    return ChatError(f"the server answered {response.status_code}: {message}")


def open_conversation(client: httpx.Client, conversation_id: str | None, out: Renderer) -> str:
    if conversation_id is None:
        response = client.post("/v1/conversations")
        if response.status_code != 201:
            raise _error(response)
        cid: str = response.json()["id"]
        out.line(f"conversation {cid}")
        return cid
    response = client.get(f"/v1/conversations/{conversation_id}/messages")
    if response.status_code != 200:
        raise _error(response)
    rows = response.json()["messages"]
    out.line(f"conversation {conversation_id} (resumed, {len(rows)} rows)")
    shown = rows[-HISTORY_SHOWN:]
    endings = _endings(client, conversation_id)
    last_of_turn = {row.get("turn_id"): index for index, row in enumerate(shown)}
    for index, row in enumerate(shown):
        if row["role"] in ("user", "assistant") and _text(row):
            who = "you" if row["role"] == "user" else "assistant"
            out.line(f"  {who}: {_short(_text(row))}")
        note = endings.get(row.get("turn_id") or "")
        if note and last_of_turn.get(row.get("turn_id")) == index:
            out.line(note)
    return conversation_id


def _endings(client: httpx.Client, conversation_id: str) -> dict[str, str]:
    """The ending line of each turn that did not end with an answer, by turn id."""
    response = client.get(f"/v1/conversations/{conversation_id}/turns")
    if response.status_code != 200:
        return {}
    found: dict[str, str] = {}
    for turn in response.json()["turns"]:
        note = _ending(turn)
        if note and turn.get("stop_reason") != "paused":
            found[str(turn["id"])] = note
    return found


def send_turn(client: httpx.Client, cid: str, text: str, out: Renderer) -> None:
    with client.stream(
        "POST",
        f"/v1/conversations/{cid}/turns",
        json={"text": text},
        headers={"accept": "text/event-stream"},
    ) as response:
        if response.status_code != 200:
            response.read()
            raise _error(response)
        decoder = SSEDecoder()
        for chunk in response.iter_text():
            for event in decoder.feed(chunk):
                if event.data is None:
                    continue
                frame = json.loads(event.data)
                out.frame(frame)
                if frame.get("type") == "turn.finished":
                    return


def _lines(stdin: TextIO, out: Renderer) -> Iterator[str]:
    interactive = stdin.isatty()
    while True:
        if interactive:
            out.write("you> ")
        line = stdin.readline()
        if not line:
            return
        yield line


def chat(
    url: str,
    conversation_id: str | None = None,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    key: str | None = None,
) -> int:
    """Run the chat; 0 on a normal exit, 1 when the server cannot be used. ``key`` is
    sent as the bearer credential (a server in auth mode ``keys``)."""
    out = Renderer(stdout or sys.stdout)
    timeout = httpx.Timeout(10.0, read=None)  # a turn may wait behind another
    headers = {"authorization": f"Bearer {key}"} if key else {}
    with httpx.Client(base_url=url.rstrip("/"), timeout=timeout, headers=headers) as client:
        try:
            cid = open_conversation(client, conversation_id, out)
        except (ChatError, httpx.HTTPError) as exc:
            out.line(f"ostinato chat: {_describe(exc, url)}")
            return 1
        out.line("type a message; /quit to leave")
        for line in _lines(stdin or sys.stdin, out):
            text = line.strip()
            if text in QUIT:
                break
            if not text:
                continue
            try:
                send_turn(client, cid, text, out)
            except ChatError as exc:
                out.line(str(exc))
            except httpx.HTTPError as exc:
                out.line(f"ostinato chat: {_describe(exc, url)}")
                return 1
    return 0


def _describe(exc: Exception, url: str) -> str:
    if isinstance(exc, httpx.ConnectError):
        return f"cannot reach a server at {url} ({exc}); is `ostinato serve` running?"
    return str(exc)
