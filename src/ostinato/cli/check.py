"""``ostinato check-config``: every mistake in the settings, reported at once.

It reads the settings as ``serve`` does (the file, the environment), then opens what
``serve`` would open (``ostinato.sources.check_sources``): each OpenAPI document is loaded
and read, each MCP server's command is looked up and, unless ``--offline``, the server is
started and asked for its tools, and every tool name the settings use is looked for among
all the sources' tools. Exit status: 0 and a summary when all is well; 1 and every
problem, each ``where: what``; 2 when the file cannot be read at all.
"""

from __future__ import annotations

import asyncio
import sys
from typing import TextIO


def check_config(path: str | None, *, start_servers: bool = True, out: TextIO | None = None) -> int:
    return asyncio.run(check(path, start_servers=start_servers, out=out or sys.stdout))


async def check(path: str | None, *, start_servers: bool, out: TextIO) -> int:
    from ostinato.config import ConfigError, read_config
    from ostinato.sources import check_sources

    try:
        loaded = read_config(path)
    except ConfigError as exc:
        print(f"{exc.source}: {'; '.join(exc.problems)}", file=out)
        return 2
    config = loaded.config
    problems = loaded.problems + await check_sources(
        config, loaded.raw, _environ(), start_servers=start_servers
    )
    if problems:
        print(f"{loaded.source}: {len(problems)} problem(s)", file=out)
        for problem in problems:
            print(f"  {problem}", file=out)
        return 1
    agents = ", ".join(a.id for a in config.agents) or "assistant (built in)"
    sources = [s.name for s in config.tools.openapi] + [s.name for s in config.tools.mcp]
    print(f"{loaded.source}: OK", file=out)
    print(f"  agents: {agents} (default: {config.default_agent().id})", file=out)
    print(f"  model:  {config.models.default or 'autodetect'}", file=out)
    print(f"  tool sources: {', '.join(sources) or 'built-ins only'}", file=out)
    if not start_servers and config.tools.mcp:
        print("  (MCP servers not started: --offline)", file=out)
    return 0


def _environ() -> dict[str, str]:
    import os

    return dict(os.environ)
