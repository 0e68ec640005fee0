"""An internal service holding a secret, for the tests that prove a schema from outside
never reads it: ``internal_service()`` serves ``{"enum": [SECRET]}`` at any path and
counts who asked (``Secret.hits``)."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator
from typing import Any

SECRET = "the-internal-secret-4471"


class Secret(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        Secret.hits.append(self.path)
        body = f'{{"enum": ["{SECRET}"]}}'.encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def internal_service() -> Iterator[str]:
    """Its base URL while the block runs; ``Secret.hits`` starts empty."""
    Secret.hits = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Secret)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
