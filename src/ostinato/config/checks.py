"""Checks between settings, run on a validated ``Config`` (each field is already valid on
its own). Each problem is a line ``where: what``, ``where`` in the file's own terms
(``agents[1].tier``), found from the merged values the config was built from, since a
wrong entry set aside by validation shifts the positions of the ones after it.

Checks that need to open something (an OpenAPI document, an MCP server) are in
``config.probe``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ostinato.config.sections import TIER_NAMES
from ostinato.config.settings import Config

TITLE_WORDS = ("conversation", "off")  # the values of data.titles that name no model


def cross_checks(config: Config, raw: dict[str, Any]) -> list[str]:
    places = Places(raw)
    return [
        *_agents(config, places),
        *_model_ids(config, places),
        *_sources(config, places),
        *_metrics(config),
    ]


def _metrics(config: Config) -> Iterator[str]:
    """``/metrics`` names tools and models and counts everyone's turns: outside mode
    ``none`` it is served only to a request bearing its token."""
    seen = config.observability
    if seen.metrics and config.auth.mode != "none" and seen.metrics_token is None:
        yield (
            "observability.metrics_token: needed when metrics are on and auth.mode is "
            f"{config.auth.mode!r} (/metrics would be open to every caller)"
        )


class Places:
    """Where an entry of a list (an agent, a tool source) is in the file."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw

    def of(self, path: Sequence[str], key: str, value: str) -> str:
        node: Any = self.raw
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        label = ".".join(path)
        if isinstance(node, list):
            for index, entry in enumerate(node):
                if isinstance(entry, dict) and entry.get(key) == value:
                    return f"{label}[{index}]"
        return f"{label} {value!r}"

    def agent(self, agent_id: str) -> str:
        return self.of(("agents",), "id", agent_id)

    def mcp(self, name: str) -> str:
        return self.of(("tools", "mcp"), "name", name)

    def openapi(self, name: str) -> str:
        return self.of(("tools", "openapi"), "name", name)


def _agents(config: Config, places: Places) -> Iterator[str]:
    ids = [a.id for a in config.agents]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        yield f"agents: agent ids must be unique; repeated: {', '.join(repeated)}"
    defaults = [a.id for a in config.agents if a.default]
    if len(defaults) > 1:
        yield f"agents: at most one agent may be the default (not {', '.join(defaults)})"
    tiers = set(TIER_NAMES) | set(config.models.tiers)
    for agent in config.agents:
        if ":" not in agent.tier and agent.tier not in tiers:
            yield (
                f"{places.agent(agent.id)}.tier: unknown tier {agent.tier!r} (known: "
                f"{', '.join(sorted(tiers))}; or give a provider:model id)"
            )


def _model_ids(config: Config, places: Places) -> Iterator[str]:
    from ostinato.errors import InvalidRequest
    from ostinato.models.providers import parse_model_id

    tiers = set(TIER_NAMES) | set(config.models.tiers)
    named: list[tuple[str, str | None]] = [
        ("models.default", config.models.default),
        ("models.router", config.models.router),
        ("models.summarizer", config.models.summarizer),
        ("data.titles", None if config.data.titles in TITLE_WORDS else config.data.titles),
        *((f"models.tiers.{name}", value) for name, value in config.models.tiers.items()),
        *((f"{places.agent(a.id)}.tier", a.tier) for a in config.agents),
    ]
    for label, value in named:
        if value is None:
            continue
        if ":" not in value:
            if label.startswith("models.tiers."):
                yield f"{label}: {value!r} is not a provider:model id"
            elif label.startswith(("models.", "data.")) and value.lower() not in tiers:
                yield f"{label}: unknown tier {value!r} (known: {', '.join(sorted(tiers))})"
            continue
        try:
            parse_model_id(value)
        except InvalidRequest as exc:
            yield f"{label}: {exc.message}"


def _sources(config: Config, places: Places) -> Iterator[str]:
    names = [s.name for s in config.tools.openapi] + [s.name for s in config.tools.mcp]
    for name in sorted({n for n in names if names.count(n) > 1}):
        yield f"tools: two tool sources are named {name!r}"
    for source in config.tools.mcp:
        if (source.command is None) == (source.url is None):
            yield f"{places.mcp(source.name)}: give exactly one of 'command' or 'url'"
        elif source.url is not None and not source.url.startswith(("http://", "https://")):
            yield f"{places.mcp(source.name)}.url: an MCP server's url must be http(s)"
