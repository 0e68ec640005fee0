"""The chat's ``/`` commands: ``/attach``, ``/new``, ``/open``, ``/model``, ``/edit``,
``/retry``, ``/branches`` (``tree``), ``/help``, ``/quit``. ``run`` answers whether a line
was one."""

from __future__ import annotations

from pathlib import Path

from ostinato.cli.chat import tree
from ostinato.cli.chat.session import HELP, Leave, Session
from ostinato.client import APIError

QUIT = frozenset({"/quit", "/exit"})
OWN = "the agent's own"


def run(session: Session, text: str) -> bool:
    """Do the command ``text``; ``False`` when it is not one (it is then sent as a
    message: a skill's ``/name`` or the offline model's ``/tool``)."""
    name, _, rest = text.partition(" ")
    rest = rest.strip()
    view = session.view
    if name in QUIT:
        raise Leave
    if name == "/help":
        view.line(HELP)
    elif name == "/new":
        session.open(None)
    elif name == "/open" and rest:
        _open(session, rest)
    elif name == "/attach" and rest:
        _attach(session, Path(rest).expanduser())
    elif name == "/model":
        _model(session, rest)
    elif name == "/edit":
        tree.edit(session, rest)
    elif name == "/retry":
        tree.retry(session)
    elif name == "/branches":
        tree.branches(session, rest)
    else:
        return False
    return True


def _open(session: Session, conversation_id: str) -> None:
    try:
        session.open(conversation_id)
    except APIError as error:
        session.view.line(f"the server answered {error.status}: {error.message}", "red")


def _attach(session: Session, path: Path) -> None:
    if not path.is_file():
        session.view.line(f"  no file at {path}", "red")
        return
    session.attached.append(path)
    names = ", ".join(p.name for p in session.attached)
    session.view.line(f"  attached to your next message: {names}", "dim")


def _model(session: Session, name: str) -> None:
    view = session.view
    try:
        if not name:
            current = session.client.conversation(session.cid).metadata.get("model")
            view.line(f"  this conversation's model: {current or OWN}")
            for entry in session.client.models():
                extra = entry.get("ostinato") or {}
                kind = "agent" if "agent" in extra else "model"
                tiers = ", ".join(extra.get("tiers") or [])
                view.line(f"  {entry['id']}  ({kind}{'; ' + tiers if tiers else ''})")
            view.line("  /model NAME sets it (a tier or provider:model id); /model - clears it")
            return
        chosen = None if name == "-" else name
        session.client.update_conversation(session.cid, model=chosen)
        view.line(f"  model: {chosen or OWN}", "dim")
    except APIError as error:
        view.line(f"the server answered {error.status}: {error.message}", "red")
