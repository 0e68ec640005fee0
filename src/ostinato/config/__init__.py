"""The configuration: ``ostinato.toml``, ``OSTINATO_*`` variables and flags, validated
once into a ``Config`` (``config.settings`` says how the layers combine and how to add a
section; ``docs/configuration.md`` lists every setting).

The import list below is the public API.
"""

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
from ostinato.config.settings import (
    CONFIG_ENV,
    DEFAULT_PATH,
    Config,
    ConfigError,
    Loaded,
    config_path,
    load_config,
    read_config,
)
from ostinato.config.tools import McpSource, OpenApiSource, ToolsSection

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_PATH",
    "TIER_NAMES",
    "AgentFilters",
    "AgentSection",
    "ApprovalsSection",
    "ClientSection",
    "CompletionsSettings",
    "Config",
    "ConfigError",
    "FilterSettings",
    "GuidelinesSection",
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
