"""``ostinato chat``: a terminal chat against a running server.

It opens a conversation (or resumes one), reads lines from stdin and sends each as a turn
with ``Accept: text/event-stream``; the reply's text streams as it comes and every tool
step shows as a line. ``/quit`` or end of input leaves.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
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
        if kind == "text.delta":
            self.write(str(frame.get("text", "")))
            self.streamed = True
        elif kind in ("tool.started", "tool.finished") and (
            frame.get("category") == "read" or frame.get("tool_use_id") in self.quiet
        ):
            self.quiet.add(str(frame.get("tool_use_id")))
        elif kind == "tool.started":
            arguments = json.dumps(frame.get("input", {}), ensure_ascii=False)
            self.line(f"  [tool] {frame.get('name')} {_short(arguments)}")
        elif kind == "tool.finished":
            seconds = float(frame.get("duration_s") or 0.0)
            self.line(
                f"  [tool] {frame.get('name')} -> {frame.get('status')} ({seconds:.2f} s): "
                f"{_short(str(frame.get('result', '')))}"
            )
        elif kind == "message":
            self._message(frame.get("message") or {})
        elif kind == "model.retrying":
            self.line(f"  [model busy, retrying in {frame.get('delay_s')} s: {frame.get('error')}]")
        elif kind == "error":
            self.line(f"  [error] {frame.get('code')}: {frame.get('message')}")
        elif kind == "turn.finished":
            if not self.at_line_start:
                self.write("\n")
            reason = frame.get("stop_reason")
            if reason != "end_turn":
                error = f": {frame['error']}" if frame.get("error") else ""
                self.line(f"  [turn ended {reason}{error}]")

    def _message(self, message: dict[str, Any]) -> None:
        """An assistant row whose text did not stream (some models do not) is shown whole."""
        if message.get("role") != "assistant":
            return
        if not self.streamed:
            self.write(_text(message))
        self.streamed = False


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
    for row in rows[-HISTORY_SHOWN:]:
        if row["role"] in ("user", "assistant") and _text(row):
            who = "you" if row["role"] == "user" else "assistant"
            out.line(f"  {who}: {_short(_text(row))}")
    return conversation_id


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
) -> int:
    """Run the chat; 0 on a normal exit, 1 when the server cannot be used."""
    out = Renderer(stdout or sys.stdout)
    timeout = httpx.Timeout(10.0, read=None)  # a turn may wait behind another
    with httpx.Client(base_url=url.rstrip("/"), timeout=timeout) as client:
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
