"""The ``ostinato`` command: ``serve``, ``chat`` and ``replay``.

::

    ostinato serve [--host 127.0.0.1] [--port 8000] [--database-url URL]
                   [--data-dir DIR] [--approval-timeout SECONDS] [--config FILE]
    ostinato check-config [FILE]
    ostinato chat [--url http://127.0.0.1:8000] [--conversation ID]
    ostinato replay CONVERSATION_ID [--database-url URL] [--recorded-tools clock]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence

from ostinato import __version__
from ostinato.cli.replay import RECORDED_BY_DEFAULT

CONFIG_HELP = "the configuration file (default: $OSTINATO_CONFIG, else ./ostinato.toml if present)"
DATABASE_HELP = (
    "the store: sqlite:///path/to.db, postgresql://user:pass@host/db or memory:// "
    "(default: $OSTINATO_DATABASE_URL, else ./ostinato.db)"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ostinato", description="Run LLM agents as chat conversations."
    )
    parser.add_argument("--version", action="version", version=f"ostinato {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the HTTP API server")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    serve.add_argument("--port", type=int, default=8000, help="port (default %(default)s)")
    serve.add_argument("--database-url", help=DATABASE_HELP)
    serve.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    serve.add_argument(
        "--data-dir",
        metavar="DIR",
        help="where each conversation's workdir is made, for the file and shell tools "
        "(default: $OSTINATO_DATA_DIR, else ./ostinato-data)",
    )
    serve.add_argument(
        "--approval-timeout",
        type=float,
        metavar="SECONDS",
        help="how long a tool call waits for a person's approval "
        "(default: $OSTINATO_APPROVAL_TIMEOUT, else 300)",
    )

    check = commands.add_parser("check-config", help="validate a configuration file")
    check.add_argument("config", nargs="?", metavar="FILE", help=CONFIG_HELP)

    chat = commands.add_parser("chat", help="chat with a running server in the terminal")
    chat.add_argument(
        "--url", default="http://127.0.0.1:8000", help="the server (default %(default)s)"
    )
    chat.add_argument("--conversation", metavar="ID", help="resume this conversation")

    replay = commands.add_parser(
        "replay", help="re-run a conversation's turns with the recorded model outputs"
    )
    replay.add_argument("conversation_id", metavar="CONVERSATION_ID")
    replay.add_argument("--database-url", help=DATABASE_HELP)
    replay.add_argument(
        "--recorded-tools",
        default=",".join(sorted(RECORDED_BY_DEFAULT)),
        metavar="NAMES",
        help="comma-separated tools whose stored results are played back instead of running "
        "them (default %(default)s; '' runs every tool)",
    )
    return parser


def check_config(path: str | None) -> int:
    """Validate the configuration: 0 and a summary when it is valid, 1 and every problem
    with where it is when it is not."""
    from ostinato.config import ConfigError, load_config

    try:
        config, source = load_config(path)
    except ConfigError as exc:
        print(f"{exc.source}: {len(exc.problems)} problem(s)")
        for problem in exc.problems:
            print(f"  {problem}")
        return 1
    agents = ", ".join(a.id for a in config.agents) or "assistant (built in)"
    print(f"{source}: OK")
    print(f"  agents: {agents} (default: {config.default_agent().id})")
    print(f"  model:  {config.models.default or 'autodetect'}")
    sources = [s.name for s in config.tools.openapi] + [s.name for s in config.tools.mcp]
    print(f"  tool sources: {', '.join(sources) or 'built-ins only'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            from ostinato.cli.serve import serve

            return asyncio.run(
                serve(
                    args.host,
                    args.port,
                    args.database_url,
                    data_dir=args.data_dir,
                    approval_timeout=args.approval_timeout,
                    config_path=args.config,
                )
            )
        if args.command == "check-config":
            return check_config(args.config)
        if args.command == "chat":
            from ostinato.cli.chat import chat

            return chat(args.url, args.conversation)
        from ostinato.cli.replay import replay

        url = args.database_url or os.environ.get("OSTINATO_DATABASE_URL") or None
        tools = {name.strip() for name in args.recorded_tools.split(",") if name.strip()}
        return asyncio.run(replay(args.conversation_id, url, tools))
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
