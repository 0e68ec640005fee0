"""What ``ostinato serve`` says when it starts: the settings that matter and where they
came from, each tool source and whether it answered, tool names the settings use that no
source has, and whether the after-turn fact extraction is on.

A source that failed and a tool name that is missing are also logged as warnings, so a
process manager's log has them too; ``GET /v1/tools/sources`` shows the sources' status
while the server runs.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TextIO

from ostinato import __version__
from ostinato.config import Config
from ostinato.config.checks import Places
from ostinato.sources import unknown_tools
from ostinato.store import describe_url

if TYPE_CHECKING:
    from ostinato.deployment import Deployment
    from ostinato.models.choice import DefaultModel

log = logging.getLogger("ostinato.serve")


async def tool_warnings(config: Config, deployment: Deployment) -> list[str]:
    """List every source once (so each has a status), and say which tool names the
    settings use that none of them has."""
    mount = deployment.runtime.mount
    mounted = await mount.registry(None)
    names = {tool.name for tool in mounted.registry}
    failed = [s.name.partition(":")[2] for s in mount.status() if s.state == "failed"]
    warnings = unknown_tools(config, Places({}), names, failed)
    for warning in warnings:
        log.warning("%s", warning)
    return warnings


def banner(
    config: Config,
    source: str,
    model: DefaultModel,
    deployment: Deployment,
    warnings: list[str],
    out: TextIO,
) -> None:
    server, runtime = config.server, deployment.runtime
    print(f"ostinato {__version__}", file=out)
    print(f"  config:   {source}", file=out)
    print(f"  model:    {model}", file=out)
    print(f"  database: {describe_url(server.database_url)}", file=out)
    print(f"  data dir: {runtime.data_dir}  (conversation workdirs)", file=out)
    print(f"  approval: waits {config.approvals.timeout:g} s for a person", file=out)
    print(f"  shutdown: running turns get {config.server.shutdown_grace_s:g} s to end", file=out)
    print(f"  skills:   {', '.join(s.id for s in runtime.router.skills)}", file=out)
    anonymous = " + anonymous callers" if config.auth.allow_anonymous else ""
    print(f"  auth:     mode {config.auth.mode}{anonymous}  (docs/auth.md)", file=out)
    print(f"  memory:   {facts_line(config, deployment)}", file=out)
    sources = runtime.mount.status()
    listed = ", ".join(f"{s.name} ({s.tools})" for s in sources if s.state == "ok")
    print(f"  tools:    {listed or 'none'}", file=out)
    for status in sources:
        if status.state == "failed":
            print(f"  FAILED:   {status.name}: {status.error}", file=out)
            print("            (its tools are left out; GET /v1/tools/sources)", file=out)
    for warning in warnings:
        print(f"  WARNING:  {warning}", file=out)
    print(f"  api:      http://{server.host}:{server.port}/v1  (docs at /docs)", file=out)
    out.flush()


def facts_line(config: Config, deployment: Deployment) -> str:
    summarizer = deployment.models.resolve(config.models.summarizer)
    chosen = "set by memory.extract_facts"
    if config.memory.extract_facts is None:
        chosen = "the default for this model; memory.extract_facts sets it"
    if deployment.facts:
        return (
            f"fact extraction ON: after each answered turn, one more call to {summarizer} "
            f"stores facts about the person ({chosen})"
        )
    return f"fact extraction off ({chosen})"
