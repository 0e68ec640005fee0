"""Deleting a conversation for good: its rows in one write (``store.erasure``), then the
files of its workdir. A conversation whose turn is running is refused (``Conflict``):
stop the turn first; a paused one is deleted with what it waits on.

Erasing an owner (``erase_owner``): every row of theirs in one write, the workdirs of
their conversations, then the engine's cleanup (``compact``: SQLite's full-text indexes
merged, ``VACUUM`` and the WAL truncated; PostgreSQL's ``VACUUM``), so that no file of
the database keeps their bytes. An owner with a running turn is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

from ostinato.errors import Conflict
from ostinato.runtime import Runtime
from ostinato.store.base import Store
from ostinato.store.erasure import DeleteConversation, EraseOwner


class ConversationBusy(Conflict):
    code = "conversation_busy"


async def delete_conversation(runtime: Runtime, conversation_id: str) -> None:
    """Delete the conversation and its workdir; ``NotFound`` if there is none."""
    conversation = await runtime.conversation(conversation_id)
    if conversation.state == "running" or runtime.busy(conversation_id):
        raise ConversationBusy(
            f"conversation {conversation_id!r} has a turn running: cancel it, then delete"
        )
    await runtime.store.write(DeleteConversation(conversation_id))
    remove_workdir(runtime.data_dir, conversation_id)


def remove_workdir(data_dir: Path | None, conversation_id: str) -> None:
    """Remove ``<data_dir>/workdirs/<id>`` and what it holds (nothing if it is not there,
    or names something that is not a directory of its own)."""
    if data_dir is None or "/" in conversation_id or conversation_id in ("", ".", ".."):
        return
    folder = Path(data_dir) / "workdirs" / conversation_id
    if folder.is_dir() and not folder.is_symlink():
        shutil.rmtree(folder, ignore_errors=True)


async def erase_owner(
    store: Store, owner: str, data_dir: Path | None, runtime: Runtime | None = None
) -> list[str]:
    """Erase everything of ``owner``; the ids of the conversations deleted. With a
    ``runtime``, a conversation it runs a turn of refuses it (``ConversationBusy``), as
    does one whose stored state is running."""
    page = await store.list_conversations(owner=owner, limit=10_000)
    for conversation in page:
        running = runtime is not None and runtime.busy(conversation.id)
        if conversation.state == "running" or running:
            raise ConversationBusy(
                f"{owner!r} has a turn running in conversation {conversation.id!r}: "
                "cancel it, then erase"
            )
    (ids,) = await store.write(EraseOwner(owner))
    for cid in ids:
        remove_workdir(data_dir, cid)
    compact = getattr(store, "compact", None)
    if compact is not None:
        await compact()
    return list(ids)
