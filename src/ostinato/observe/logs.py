"""Log formats for ``ostinato serve``: plain text lines (the default) or JSON lines.

``JsonFormatter`` writes one object a line: ``time`` (UTC, ISO 8601), ``level``,
``logger``, ``event`` (the message), and, when the line was logged during a turn or
background work, its ``conversation_id``, ``run_id`` and ``owner`` (read from the
observed scope current in the task that logged it, ``observe.scopes.CURRENT``). An
exception's traceback is ``exception``. ``configure`` gives the root logger's
stream handler one of the two.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

from ostinato.observe.scopes import CURRENT, Holder

PLAIN = "%(levelname)s:     %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object a line (see the module doc)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        scope = CURRENT.get()
        holder = scope if isinstance(scope, Holder) or scope is None else scope.holder()
        if holder is not None:
            line["conversation_id"] = holder.conversation_id
            if holder.run_id:  # a job (a schedule's firing) is no turn's
                line["run_id"] = holder.run_id
            if holder.owner is not None:
                line["owner"] = holder.owner
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, ensure_ascii=False, default=str)


def formatter(kind: Literal["plain", "json"]) -> logging.Formatter:
    return JsonFormatter() if kind == "json" else logging.Formatter(PLAIN)


QUIET = ("httpx", "httpx2")  # the SDKs' HTTP client (``configure``)


def configure(
    kind: Literal["plain", "json"], *, level: int = logging.INFO, stream: TextIO | None = None
) -> logging.Handler:
    """Log from the root logger in format ``kind``: the root's plain stream handler (as
    ``logging.basicConfig`` made it) gets the format, else one writing to ``stream``
    (stderr) is added. Other handlers (a test's capture) are left as they are. The SDKs'
    HTTP client logs each request it sends at INFO (a line per model call, its URL and
    status): it logs from WARNING, as the model calls' own records say more."""
    root = logging.getLogger()
    root.setLevel(level)
    for client in QUIET:
        logging.getLogger(client).setLevel(max(level, logging.WARNING))
    for handler in root.handlers:
        if type(handler) is logging.StreamHandler and stream is None:
            handler.setFormatter(formatter(kind))
            return handler
    added = logging.StreamHandler(stream or sys.stderr)
    added.setFormatter(formatter(kind))
    root.addHandler(added)
    return added
