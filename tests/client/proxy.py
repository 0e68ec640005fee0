"""A TCP proxy for tests: it passes bytes between its clients and a server, records the
head of every request it sees, and can cut every open connection at once (a network
that fails mid-stream)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Proxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.heads: list[str] = []  # each request's first bytes, as text
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            with self._lock:
                self._open += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, requests: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if requests:
                    self.heads.append(data.decode("latin-1").split("\r\n\r\n", 1)[0])
                sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Break every connection open now (new ones still get through)."""
        with self._lock:
            connections, self._open = self._open, []
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()


@contextmanager
def proxy_to(url: str) -> Iterator[Proxy]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    proxy = Proxy((host, int(port)))
    threading.Thread(target=proxy._accept, daemon=True).start()
    try:
        yield proxy
    finally:
        proxy.listener.close()
        proxy.cut()
