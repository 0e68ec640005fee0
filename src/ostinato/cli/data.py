"""``ostinato export``, ``ostinato import`` and ``ostinato owners erase``: a person's data
out of, into and wiped from the store the server uses (``docs/data.md``).

::

    ostinato export [CONVERSATION_ID] [--owner ann] [--format json|markdown] [--memories]
                    [-o FILE]
    ostinato import FILE [--owner ann]
    ostinato owners erase ann

They work on the database directly (``--database-url``, else ``$OSTINATO_DATABASE_URL``,
else the config file's, else ``./ostinato.db``), like ``ostinato keys``. ``export``
without an id writes every conversation of ``--owner`` (every conversation in the
database without it) as one export file; an export is written as it is read.
``--memories`` adds the memories (current facts) of the file's owner (``--owner``, else
the conversation's, else ``local``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, TextIO


def add_parsers(commands: Any, database_help: str, config_help: str) -> None:
    """The ``export``, ``import`` and ``owners`` commands."""
    export = commands.add_parser("export", help="write conversations as JSON or Markdown")
    export.add_argument("conversation_id", nargs="?", metavar="CONVERSATION_ID")
    export.add_argument("--owner", help="whose conversations (default: every owner's)")
    export.add_argument("--format", choices=("json", "markdown"), default="json")
    export.add_argument(
        "--memories", action="store_true", help="add the owner's memories (JSON only)"
    )
    export.add_argument("-o", "--output", metavar="FILE", help="the file (default: stdout)")
    imports = commands.add_parser(
        "import", help="read an export file, or ChatGPT's conversations.json, as new conversations"
    )
    imports.add_argument("file", metavar="FILE")
    imports.add_argument("--owner", default=None, help="whose they become (default: local)")
    owners = commands.add_parser("owners", help="erase everything of an owner")
    actions = owners.add_subparsers(dest="action", required=True, metavar="ACTION")
    erase = actions.add_parser(
        "erase", help="delete every row and file of the owner, then vacuum the database"
    )
    erase.add_argument("owner", metavar="OWNER")
    erase.add_argument(
        "--data-dir", metavar="DIR", help="where the workdirs are (default: server.data_dir)"
    )
    for command in (export, imports, erase):
        command.add_argument("--database-url", help=database_help)
        command.add_argument("--config", metavar="FILE", help=config_help)


async def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from ostinato.config import ConfigError, load_config
    from ostinato.errors import ClientError
    from ostinato.store import open_store

    out = out or sys.stdout
    name = "owners erase" if args.command == "owners" else args.command
    try:
        config, _ = load_config(args.config)
    except ConfigError as exc:
        print(f"ostinato {name}: {exc}", file=sys.stderr)
        return 2
    store = await open_store(args.database_url or config.server.database_url or None)
    try:
        if args.command == "export":
            return await _export(store, args, out)
        if args.command == "import":
            return await _import(store, args, config.memory.capacity, out)
        return await _erase(store, args, config, out)
    except ClientError as exc:
        print(f"ostinato {name}: {exc.message}", file=sys.stderr)
        return 1
    finally:
        await store.close()


def _target(path: str | None, out: TextIO) -> AbstractContextManager[TextIO]:
    return nullcontext(out) if path in (None, "-") else Path(str(path)).open("w", encoding="utf-8")


async def _export(store: Any, args: argparse.Namespace, out: TextIO) -> int:
    from ostinato.errors import NotFound
    from ostinato.identity.owners import LOCAL_OWNER  # identity loads pydantic
    from ostinato.transfer.exporting import (
        conversation_markdown,
        export_json,
        owner_conversations,
    )

    owner = args.owner or LOCAL_OWNER
    if args.format == "markdown" and (args.memories or args.conversation_id is None):
        why = "has no memories" if args.memories else "is of one conversation: name it"
        print(f"ostinato export: Markdown {why}", file=sys.stderr)
        return 2
    if args.conversation_id is None:
        conversations = owner_conversations(store, args.owner)
        pieces = export_json(store, conversations, owner, memories=args.memories)
    else:
        found = await store.get_conversation(args.conversation_id)
        if found is None or (args.owner is not None and found.owner != args.owner):
            raise NotFound(f"no conversation {args.conversation_id!r}")
        if args.format == "markdown":
            pieces = conversation_markdown(store, found)
        else:
            whose = args.owner or found.owner or owner
            pieces = export_json(store, [found], whose, memories=args.memories)
    with _target(args.output, out) as target:
        async for piece in pieces:
            target.write(piece)
    return 0


async def _import(store: Any, args: argparse.Namespace, capacity: int, out: TextIO) -> int:
    from ostinato.identity.owners import LOCAL_OWNER
    from ostinato.transfer.importing import import_document, read_document

    owner = args.owner or LOCAL_OWNER
    try:
        raw = await asyncio.to_thread(Path(args.file).read_bytes)
    except OSError as exc:
        print(f"ostinato import: {exc}", file=sys.stderr)
        return 2
    ids = await import_document(store, read_document(raw, owner), owner, capacity=capacity)
    for cid in ids:
        print(cid, file=out)
    print(f"imported {len(ids)} conversation(s) for {owner}", file=sys.stderr)
    return 0


async def _erase(store: Any, args: argparse.Namespace, config: Any, out: TextIO) -> int:
    from ostinato.deletion import erase_owner

    data_dir = args.data_dir or config.server.data_dir
    ids = await erase_owner(store, args.owner, Path(data_dir) if data_dir else None)
    print(f"erased {args.owner}: {len(ids)} conversation(s), and every row of theirs", file=out)
    return 0
