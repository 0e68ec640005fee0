"""A live configuration: ``ostinato.toml`` read again without a restart (SIGHUP, or
``POST /v1/admin/reload``), checked first, applied whole or not at all.

``Reloader.reload`` reads the settings again exactly as at start (the same file, the
same flags, the environment as it is now) and runs every check ``check-config`` runs on
them (``config.read_config``). A file with any mistake changes nothing: the running
configuration stays, and the answer names each problem and where it is. A change to a
setting the running server cannot take without a restart (``RESTART_ONLY``: where it
listens, its store, who may call, its tool sources ...) is refused the same way, naming
the setting. A good change applies to turns that begin after it (a running turn keeps
what it began with): the agents (their prompts, tools, budgets of model calls, approval
policies), the shared guidelines, the approval policy, the model tiers, the router's and
the summariser's models, the price table and the spend budgets. An agent that changed
gets a new version (``ostinato.pinning``): conversations pinned to the old one keep it.

What is live and what needs a restart is decided by ``changes`` (pure); ``Reloader``
only reads and applies.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ostinato.approvals import ApprovalPolicy
from ostinato.config import Config, ConfigError, read_config
from ostinato.deployment import Deployment, skills_of
from ostinato.models.choice import Tiers
from ostinato.observe import prices
from ostinato.skills import Router

log = logging.getLogger("ostinato.reload")

# Settings a running server takes at once (a section, or "section.setting").
LIVE = frozenset(
    {
        "agents",
        "guidelines",
        "approvals",
        "budgets",
        "models.tiers",
        "models.router",
        "models.summarizer",
        "observability.prices",
    }
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a reload did: ``applied``, the settings it changed (``changed``), or why it
    changed nothing (``problems``, each ``where: what``); ``source`` is the file read."""

    applied: bool
    source: str
    changed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _flat(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"models.tiers": ..., "server.port": ...}``: each section's settings by name."""
    found: dict[str, Any] = {}
    for name, value in values.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping) and not prefix:
            found.update(_flat(value, key + "."))
        else:
            found[key] = value
    return found


def changes(before: Config, after: Config) -> tuple[list[str], list[str]]:
    """The settings that differ, split into those applied live and those that need a
    restart (``section.setting`` names; a list section like ``agents`` by itself)."""
    old, new = _flat(before.model_dump(mode="json")), _flat(after.model_dump(mode="json"))
    differ = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    live = [k for k in differ if k in LIVE or k.split(".", 1)[0] in LIVE]
    return live, [k for k in differ if k not in live]


class Reloader:
    """Reads ``path`` (with the command line's ``overrides``) again and applies it to
    ``deployment``; ``config`` is the one running now."""

    def __init__(
        self,
        deployment: Deployment,
        config: Config,
        path: str | Path | None,
        overrides: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.deployment, self.config = deployment, config
        self.path, self.overrides = path, dict(overrides or {})
        self.env = env  # None: the process environment as it is at each reload

    async def reload(self) -> Outcome:
        env = os.environ if self.env is None else self.env
        try:
            loaded = read_config(self.path, env=env, overrides=self.overrides)
        except ConfigError as exc:
            return Outcome(False, exc.source, problems=exc.problems)
        if loaded.problems:
            return Outcome(False, loaded.source, problems=loaded.problems)
        live, restart = changes(self.config, loaded.config)
        if restart:
            problems = [f"{name}: changing it needs a restart" for name in restart]
            return Outcome(False, loaded.source, problems=problems)
        try:
            self.apply(loaded.config)
        except (ConfigError, ValueError) as exc:  # e.g. a tier no provider can serve
            return Outcome(False, loaded.source, problems=[str(exc)])
        self.config = loaded.config
        pinning = self.deployment.runtime.pinning
        if pinning is not None:  # a new version of each agent that changed
            await pinning.record(self.deployment.runtime.router.skills)
        return Outcome(True, loaded.source, changed=live)

    def apply(self, config: Config) -> None:
        """Build everything first, then swap it in: a failure leaves the old in place."""
        runtime, models = self.deployment.runtime, self.deployment.models
        tiers = Tiers.for_default(models.default_id, config.models.tiers)
        old_tiers, models.tiers = models.tiers, tiers
        try:
            policy = ApprovalPolicy(frozenset(config.approvals.ask_for), config.approvals.timeout)
            skills = skills_of(config, policy)
            default = next((s for s in skills if s.id == config.default_agent().id), skills[0])
            classifier = models(config.models.router) if len(skills) > 1 else None
            summarizer = models(config.models.summarizer)
        except Exception:
            models.tiers = old_tiers
            raise
        table = {m: prices.Price(**p.model_dump()) for m, p in config.observability.prices.items()}
        prices.configure(table)
        runtime.router = Router(skills, default=default, classifier=classifier)
        runtime.history_limit = max(s.agent.history_messages for s in runtime.router.skills)
        runtime.consent.policy = policy
        runtime.compactor.model = summarizer
        budgets = config.budgets.budgets()
        if runtime.spend is not None and budgets != runtime.spend.budgets:
            runtime.spend.budgets = budgets  # the same ones: the tabs kept go on under them

    async def reload_logged(self) -> Outcome:
        """``reload``, said in the server's log (SIGHUP has no one to answer)."""
        outcome = await self.reload()
        if outcome.applied:
            changed = ", ".join(outcome.changed) or "no change"
            log.warning("reloaded %s: %s", outcome.source, changed)
        else:
            log.error("reload of %s refused: %s", outcome.source, "; ".join(outcome.problems))
        return outcome
