"""The configuration: ``ostinato.toml``, ``OSTINATO_*`` variables and flags, validated
once into a ``Config`` (``config.settings`` says how the layers combine and how to add a
section; ``docs/configuration.md`` lists every setting).

The import list below is the public API. Its modules are loaded when a name is first
used, so a module that needs one section (``config.background``, as the server does)
does not load the settings' layers, the tools' sources and the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ostinato.config.budgets import BudgetsSection, LimitEntry
    from ostinato.config.loading import Loaded, config_path, load_config, read_config
    from ostinato.config.observability import ObservabilitySection, PriceEntry
    from ostinato.config.sections import (
        TIER_NAMES,
        AgentFilters,
        AgentSection,
        ApprovalsSection,
        ClientSection,
        CompletionsSettings,
        FilterSettings,
        GuidelinesSection,
        MemorySection,
        ModelsSection,
        RiskName,
        Section,
        ServerSection,
        guidelines_for,
    )
    from ostinato.config.settings import CONFIG_ENV, DEFAULT_PATH, Config, ConfigError
    from ostinato.config.tools import McpSource, OpenApiSource, ToolsSection

_MODULES = {
    "budgets": ("BudgetsSection", "LimitEntry"),
    "observability": ("ObservabilitySection", "PriceEntry"),
    "sections": (
        "TIER_NAMES",
        "AgentFilters",
        "AgentSection",
        "ApprovalsSection",
        "ClientSection",
        "CompletionsSettings",
        "FilterSettings",
        "GuidelinesSection",
        "MemorySection",
        "ModelsSection",
        "RiskName",
        "Section",
        "ServerSection",
        "guidelines_for",
    ),
    "loading": ("Loaded", "config_path", "load_config", "read_config"),
    "settings": ("CONFIG_ENV", "DEFAULT_PATH", "Config", "ConfigError"),
    "tools": ("McpSource", "OpenApiSource", "ToolsSection"),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"ostinato.config.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "CONFIG_ENV",
    "DEFAULT_PATH",
    "TIER_NAMES",
    "AgentFilters",
    "AgentSection",
    "ApprovalsSection",
    "BudgetsSection",
    "ClientSection",
    "CompletionsSettings",
    "Config",
    "ConfigError",
    "FilterSettings",
    "GuidelinesSection",
    "LimitEntry",
    "Loaded",
    "McpSource",
    "MemorySection",
    "ModelsSection",
    "ObservabilitySection",
    "OpenApiSource",
    "PriceEntry",
    "RiskName",
    "Section",
    "ServerSection",
    "ToolsSection",
    "config_path",
    "guidelines_for",
    "load_config",
    "read_config",
]
