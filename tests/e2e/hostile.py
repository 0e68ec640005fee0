"""Helpers for black-box tests of hostile input against ``ostinato serve``: a started
server per engine, and a raw HTTP/1.1 client that sends a chunked body piece by piece
and stops as soon as the server answers (as a client on a slow link would see it)."""

from __future__ import annotations

import contextlib
import json
import select
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.e2e.server import Server
from tests.e2e.test_fault_injection import database

PIECE = 64 * 1024


@contextlib.contextmanager
def serving(engine: str, tmp_path: Path) -> Iterator[Server]:
    """``ostinato serve`` with the offline model on a fresh SQLite or PostgreSQL database
    (PostgreSQL skips without ``OSTINATO_TEST_POSTGRES_URL``)."""
    with database(engine, tmp_path) as url:
        server = Server(url, tmp_path / "data", tmp_path / "serve.log", {})
        server.start()
        try:
            yield server
        finally:
            server.kill()


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    sent: int  # body bytes the client got to send before the server answered

    def json(self) -> Any:
        return json.loads(self.body)


def post_chunked(
    url: str, path: str, content_type: str, prefix: bytes, total: int, filler: bytes = b"x"
) -> Answer:
    """POST ``prefix`` then ``filler`` up to ``total`` bytes, chunked, no Content-Length;
    stop sending once the server has answered (or closed)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    with socket.create_connection((host, port), timeout=60) as sock:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: {content_type}\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        )
        sock.sendall(head.encode())
        sent = _send_chunks(sock, prefix, total, filler)
        return _read_answer(sock, sent)


def _send_chunks(sock: socket.socket, prefix: bytes, total: int, filler: bytes) -> int:
    sent = 0
    block = (filler * (PIECE // len(filler) + 1))[:PIECE]
    try:
        while sent < total:
            data = prefix if sent == 0 and prefix else block[: min(PIECE, total - sent)]
            sock.sendall(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            sent += len(data)
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                return sent  # the server answered: stop, as a client would
        sock.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server closed the connection under us
    return sent


def _read_answer(sock: socket.socket, sent: int) -> Answer:
    raw = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            raw += chunk
            if b"\r\n\r\n" in raw and _complete(raw):
                break
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    return Answer(status, headers, body, sent)


def _complete(raw: bytes) -> bool:
    head, _, body = raw.partition(b"\r\n\r\n")
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            return len(body) >= int(value.strip())
    return False
