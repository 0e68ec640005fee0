"""The ``ostinato`` command: ``serve``, ``chat``, ``replay``, ``keys``, ``export``,
``import``, ``usage`` and ``migrate``.

::

    ostinato serve [--host 127.0.0.1] [--port 8000] [--database-url URL]
                   [--data-dir DIR] [--approval-timeout SECONDS] [--config FILE]
                   [--log-format plain|json] [--workers N]
    ostinato check-config [FILE | --config FILE] [--offline]
    ostinato chat [--url http://127.0.0.1:8000] [--conversation ID]
    ostinato replay CONVERSATION_ID [--database-url URL] [--config FILE]
                    [--recorded-tools clock,recall] [--timeline]
    ostinato keys create --owner ann --name laptop [--expires-in 90d] | list | revoke ID
    ostinato export [CONVERSATION_ID] [--owner ann] [--format json|markdown] [-o FILE]
    ostinato import FILE [--owner ann]
    ostinato owners erase OWNER [--data-dir DIR]
    ostinato usage [--url URL] [--key KEY] [--since DAY] [--until DAY] [--all] [--json]
    ostinato migrate [--database-url URL] [--config FILE]

A flag is the highest layer of the settings (``ostinato.config``): it wins over the
environment and the file. Each command imports what it needs when it runs, so
``ostinato --version`` and ``--help`` import nothing heavy.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
from collections.abc import Sequence
from typing import Any

from ostinato import __version__
from ostinato.cli import data as data_command
from ostinato.cli import keys as keys_command
from ostinato.cli import usage as usage_command

# identity.binding.DANGER_FLAG, spelt here so that building the parser (and so
# ``--version``) imports nothing of the settings; tests/test_startup.py keeps them equal.
DANGER_FLAG = "--dangerously-serve-without-auth"
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
    _serve_parser(commands)
    _check_parser(commands)
    chat = commands.add_parser("chat", help="chat with a running server in the terminal")
    chat.add_argument(
        "--url", help="the server (default: client.url, $OSTINATO_URL, else http://127.0.0.1:8000)"
    )
    chat.add_argument(
        "--key",
        help="an API key for a server in auth mode keys (default: client.key, $OSTINATO_KEY)",
    )
    chat.add_argument("--conversation", metavar="ID", help="resume this conversation")
    _replay_parser(commands)
    keys_command.add_parser(commands, DATABASE_HELP, CONFIG_HELP)
    data_command.add_parsers(commands, DATABASE_HELP, CONFIG_HELP)
    usage_command.add_parser(commands)
    migrate = commands.add_parser(
        "migrate",
        help="bring the database to the schema this version needs, then exit (serve "
        "also does it on start; see docs/deploy.md)",
    )
    migrate.add_argument("--database-url", help=DATABASE_HELP)
    migrate.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    return parser


def _serve_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser("serve", help="run the HTTP API server")
    serve.add_argument("--host", help="address to bind (default: server.host, 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default: server.port, 8000)")
    serve.add_argument("--database-url", help=DATABASE_HELP)
    serve.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    serve.add_argument(
        DANGER_FLAG,
        dest="dangerously_public",
        action="store_true",
        help="with auth mode 'none', listen on a non-loopback address anyway: anyone who "
        "can reach it acts as you (see docs/auth.md)",
    )
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
    serve.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="run N server processes on one port and database, e.g. one a core "
        "(default: server.workers, 1; docs/deploy.md)",
    )
    serve.add_argument("--worker-of", help=argparse.SUPPRESS)  # set by --workers' supervisor
    serve.add_argument(
        "--log-format",
        choices=("plain", "json"),
        help="plain text lines, or one JSON object a line with time, level, event, "
        "conversation id, run id and owner (default: observability.log_format, plain)",
    )


def _check_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = commands.add_parser(
        "check-config",
        help="report every mistake in the settings: the file, the environment, the tool "
        "sources it names (documents loaded, MCP servers started) and the tool names it uses",
    )
    check.add_argument("config", nargs="?", metavar="FILE", help=CONFIG_HELP)
    check.add_argument(  # as `serve` takes it: either way works
        "--config", dest="config_flag", metavar="FILE", help="the same, as serve takes it"
    )
    check.add_argument(
        "--offline",
        action="store_true",
        help="do not start MCP servers (their commands are still looked up)",
    )


def _replay_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    replay = commands.add_parser(
        "replay", help="re-run a conversation's turns with the recorded model outputs"
    )
    replay.add_argument("conversation_id", metavar="CONVERSATION_ID")
    replay.add_argument("--database-url", help=DATABASE_HELP)
    replay.add_argument(
        "--config",
        metavar="FILE",
        help=CONFIG_HELP + "; the turns are replayed with its tools and agents, as serve runs them",
    )
    replay.add_argument(
        "--recorded-tools",
        metavar="NAMES",
        help="comma-separated tools whose stored results are played back instead of running "
        "them (default: clock and the memory tools; '' runs every tool)",
    )
    replay.add_argument(
        "--timeline",
        action="store_true",
        help="print each turn's stored timeline (steps, model and tool calls with their "
        "offsets and durations) instead of re-running it",
    )


def serve_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The flags given, as settings (``server.port`` ...)."""
    server = {
        key: getattr(args, key)
        for key in ("host", "port", "database_url", "data_dir", "workers")
        if getattr(args, key) is not None
    }
    overrides: dict[str, Any] = {"server": server} if server else {}
    if args.approval_timeout is not None:
        overrides["approvals"] = {"timeout": args.approval_timeout}
    if args.log_format is not None:
        overrides["observability"] = {"log_format": args.log_format}
    return overrides


def _serve(args: argparse.Namespace, argv: list[str]) -> int:
    """``ostinato serve``, with the cyclic collector off while it starts, on the event
    loop ``server.loop`` names (``server.loops``): the settings are read before the loop is
    made.

    What start-up makes (modules, routes, schemas, settings) lives as long as the
    process, so the collector's passes over it while it is made free nothing. Serve,
    ready to listen, collects once, freezes what is left and turns the collector back
    on (``cli.serve.run``; a supervisor of ``--workers`` at once); it is on again here
    however serve ends."""
    gc.disable()
    try:
        from ostinato.cli.serve import hold_hangups, serve, settings
        from ostinato.server.loops import LoopUnavailable, loop_factory

        hold_hangups()  # a SIGHUP while starting must not end the process
        overrides = serve_overrides(args)
        loaded = settings(args.config, overrides, args.dangerously_public)
        if isinstance(loaded, int):
            return loaded
        try:
            factory = loop_factory(loaded[0].server.loop)
        except LoopUnavailable as exc:
            print(f"ostinato serve: {exc}", file=sys.stderr)
            return 2
        if args.worker_of is None and loaded[0].server.workers > 1:
            factory = None  # a supervisor: little work, and uvloop has no process_group
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(
                serve(
                    args.config,
                    overrides=overrides,
                    dangerously_public=args.dangerously_public,
                    worker_of=args.worker_of,
                    argv=argv,
                    loaded=loaded,
                )
            )
    finally:
        gc.enable()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            return _serve(args, list(sys.argv[1:] if argv is None else argv))
        if args.command == "check-config":
            from ostinato.cli.check import check_config

            if args.config and args.config_flag and args.config != args.config_flag:
                print("check-config: give the file once (FILE or --config FILE)", file=sys.stderr)
                return 2
            path = args.config or args.config_flag
            return check_config(path, start_servers=not args.offline)
        if args.command == "keys":
            return asyncio.run(keys_command.run(args))
        if args.command in ("export", "import", "owners"):
            return asyncio.run(data_command.run(args))
        if args.command == "chat":
            return _chat(args)
        if args.command == "usage":
            return usage_command.run(args)
        if args.command == "migrate":
            from ostinato.cli.migrate import migrate

            return asyncio.run(migrate(args.config, args.database_url))
        return _replay(args)
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130


def _chat(args: argparse.Namespace) -> int:
    from ostinato.cli.chat import chat
    from ostinato.config import ConfigError, load_config

    client = {k: getattr(args, k) for k in ("url", "key") if getattr(args, k) is not None}
    try:
        config = load_config(None, overrides={"client": client} if client else None)[0]
    except ConfigError as exc:
        print(f"ostinato chat: {exc}", file=sys.stderr)
        return 2
    key = config.client.key.get_secret_value() if config.client.key else None
    return chat(config.client.url, args.conversation, key=key)


def _replay(args: argparse.Namespace) -> int:
    from ostinato.cli.replay import RECORDED_BY_DEFAULT, replay
    from ostinato.config import ConfigError, load_config

    try:
        config = load_config(args.config)[0]
    except ConfigError as exc:
        print(f"ostinato replay: {exc}", file=sys.stderr)
        return 2
    url = args.database_url or config.server.database_url
    if args.timeline:
        from ostinato.cli.timeline import print_timelines

        return asyncio.run(print_timelines(args.conversation_id, url))
    names = RECORDED_BY_DEFAULT if args.recorded_tools is None else args.recorded_tools.split(",")
    tools = {name.strip() for name in names if name.strip()}
    return asyncio.run(replay(args.conversation_id, url, tools, config=config))
