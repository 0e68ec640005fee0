"""The chat's commands on the conversation's tree (docs/api.md, "Conversations are
trees"): ``/edit TEXT`` sends TEXT as a new version of your last message, ``/retry`` asks
for a new answer in place of the last one, ``/branches`` lists the branches (their
leaves) and ``/branches N`` makes branch N current. An edit or a retry starts a new
branch; what came before stays in its own, and ``/branches`` goes back to it."""

from __future__ import annotations

from typing import Any

from ostinato.cli.chat.session import HISTORY_SHOWN, Session
from ostinato.cli.chat.view import short, turn_endings
from ostinato.client import APIError
from ostinato.messages import Message


def _last(session: Session, role: str) -> Message | None:
    rows = session.client.messages(session.cid)
    return next((r for r in reversed(rows) if r.role == role and r.text), None)


def edit(session: Session, text: str) -> None:
    """Send ``text`` as a new version of the person's last message."""
    view = session.view
    row = _last(session, "user")
    if row is None or row.seq is None:
        view.line("  nothing to edit yet: send a message first", "dim")
        return
    if not text:
        view.line(f"  your last message: {short(row.text)}", "dim")
        view.line("  /edit TEXT sends TEXT in its place (a new branch)", "dim")
        return
    _follow(session, lambda: session.client.stream_edit(session.cid, row.seq or 0, text))


def retry(session: Session) -> None:
    """A new answer in place of the last one (to the same message)."""
    row = _last(session, "assistant")
    if row is None or row.seq is None:
        session.view.line("  no answer to retry yet", "dim")
        return
    _follow(session, lambda: session.client.stream_regenerate(session.cid, row.seq or 0))


def _follow(session: Session, frames: Any) -> None:
    try:
        session.follow(frames())
    except APIError as error:
        session.view.line(f"the server answered {error.status}: {error.message}", "red")


def branches(session: Session, which: str) -> None:
    """List the branches, or (``which``: a number from the list) switch to one."""
    view = session.view
    try:
        found = session.client.branches(session.cid)
        leaves: list[Any] = found["leaves"]
        if not which:
            _list(session, leaves)
            return
        if not which.isdigit() or not 1 <= int(which) <= len(leaves):
            view.line(f"  /branches N: N is a number from 1 to {len(leaves)}", "red")
            return
        leaf = leaves[int(which) - 1]["seq"]
        session.client.switch_branch(session.cid, leaf)
    except APIError as error:
        view.line(f"the server answered {error.status}: {error.message}", "red")
        return
    view.line(f"  branch {which} is current:", "dim")
    rows = session.client.messages(session.cid)
    view.history(rows[-HISTORY_SHOWN:], turn_endings(session.client.turns(session.cid)))


def _list(session: Session, leaves: list[Any]) -> None:
    view = session.view
    if len(leaves) < 2:
        view.line("  one branch: edit (/edit) or retry (/retry) to start another", "dim")
        return
    for number, leaf in enumerate(leaves, 1):
        message = leaf["message"]
        who = "you" if message["role"] == "user" else message["role"]
        text = " ".join(b.get("text", "") for b in message["blocks"] if b["type"] == "text")
        mark = "*" if leaf["current"] else " "
        view.line(f" {mark}{number}. {who}: {short(text, 80) or '(no text)'}")
    view.line("  * is the current branch; /branches N switches to branch N", "dim")
