"""``ostinato chat``: a terminal chat on ``ostinato.client``, rendered with ``rich``.

It opens a conversation (or resumes one, with what it waits on), reads lines and sends
each as a turn. The reply streams as Markdown, tool steps as spinners; approvals and
question cards are asked in place; Ctrl-C cancels a running turn, twice leaves. ``/help``
lists the commands (``session``, ``commands``, ``view``).
"""

from __future__ import annotations

import sys
from typing import TextIO

from rich.console import Console

from ostinato.cli.chat import commands
from ostinato.cli.chat.session import Leave, Session
from ostinato.client import APIError, Client, TransportError

__all__ = ["chat"]


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
    console = Console(file=stdout or sys.stdout, highlight=False)
    with Client(url, key=key) as client:
        session = Session(client, console, stdin or sys.stdin)
        try:
            session.open(conversation_id)
            session.view.line("type a message; /help for commands, /quit to leave")
            session.run(commands.run)
        except (Leave, KeyboardInterrupt):
            session.view.pause()
        except APIError as error:
            session.view.line(f"the server answered {error.status}: {error.message}")
            return 1
        except TransportError as error:
            session.view.line(
                f"ostinato chat: cannot reach a server at {url} ({error}); "
                "is `ostinato serve` running?"
            )
            return 1
    return 0
