"""``ostinato keys``: make, list and revoke API keys (for ``[auth] mode = "keys"``).

::

    ostinato keys create --owner ann --name laptop [--expires-in 90d]
    ostinato keys list [--owner ann]
    ostinato keys revoke ID

They work on the store the server uses (``--database-url``, else
``$OSTINATO_DATABASE_URL``, else the config file's, else ``./ostinato.db``). ``create``
prints the key once: the store keeps only a hash of it.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from ostinato.store.accounts import ApiKey


def add_parser(commands: Any, database_help: str, config_help: str) -> None:
    """The ``keys`` command and its three subcommands."""
    keys = commands.add_parser("keys", help="make, list and revoke API keys")
    actions = keys.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="make a key and print it (once)")
    create.add_argument("--owner", required=True, help="whose key it is (their conversations)")
    create.add_argument("--name", required=True, help="what it is for, e.g. laptop")
    create.add_argument(
        "--expires-in", metavar="DURATION", help="e.g. 90d, 12h, 2w (default: never)"
    )
    listing = actions.add_parser("list", help="list keys (never their secrets)")
    listing.add_argument("--owner", help="only this owner's keys")
    revoke = actions.add_parser("revoke", help="revoke a key: refused at once")
    revoke.add_argument("key_id", metavar="ID")
    for action in (create, listing, revoke):
        action.add_argument("--database-url", help=database_help)
        action.add_argument("--config", metavar="FILE", help=config_help)


async def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from ostinato.config import ConfigError, load_config
    from ostinato.errors import NotFound
    from ostinato.identity.keys import create_key, parse_duration, revoke_key
    from ostinato.store import open_store

    out = out or sys.stdout
    try:
        config, _ = load_config(args.config)
        expires = parse_duration(args.expires_in) if getattr(args, "expires_in", None) else None
    except (ConfigError, ValueError) as exc:
        print(f"ostinato keys: {exc}", file=sys.stderr)
        return 2
    url = args.database_url or config.server.database_url
    store = await open_store(url or None)
    try:
        if args.action == "create":
            key, text = await create_key(store, args.owner, args.name, expires_in=expires)
            print(text, file=out)
            print(
                f"key {key.id} for {key.owner} ({key.name}); "
                f"expires {_when(key.expires_at)}. It is shown only now: keep it safe.",
                file=sys.stderr,
            )
        elif args.action == "list":
            _table(await store.list_api_keys(args.owner), out)
        else:
            revoked = await revoke_key(store, args.key_id)
            print(f"revoked {revoked.id} ({revoked.owner}, {revoked.name})", file=out)
    except ValueError as exc:
        print(f"ostinato keys: {exc}", file=sys.stderr)
        return 2
    except NotFound as exc:
        print(f"ostinato keys: {exc.message}", file=sys.stderr)
        return 1
    finally:
        await store.close()
    return 0


def _when(value: Any) -> str:
    return value.isoformat(timespec="seconds") if value is not None else "never"


def _table(keys: list[ApiKey], out: TextIO) -> None:
    from ostinato.store.base import utcnow

    now = utcnow()
    print(f"{'ID':27}  {'OWNER':16}  {'NAME':16}  {'CREATED':25}  {'EXPIRES':25}  STATUS", file=out)
    for key in keys:
        status = "revoked" if key.revoked_at else ("expired" if not key.usable(now) else "active")
        print(
            f"{key.id:27}  {key.owner[:16]:16}  {key.name[:16]:16}  {_when(key.created_at):25}  "
            f"{_when(key.expires_at):25}  {status}",
            file=out,
        )
