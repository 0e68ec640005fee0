"""The settings: one validated model (``Config``) of everything ostinato is configured with.

Each setting is one field of one section and comes from, highest first:

1. a command-line flag (``overrides``: ``serve --database-url``, ``--data-dir`` ...);
2. the environment, ``OSTINATO_<SECTION>__<FIELD>`` (``OSTINATO_SERVER__DATA_DIR``,
   ``OSTINATO_MODELS__TIERS__FORTE``; lists and tables as JSON), read with
   pydantic-settings' environment source (``OSTINATO_`` prefix, ``__`` between keys);
3. an older short variable, where the field names one (``OSTINATO_DATA_DIR``,
   ``OSTINATO_TIER_FORTE``);
4. the file: ``--config``, else ``$OSTINATO_CONFIG``, else ``./ostinato.toml`` when it
   exists (pydantic-settings' TOML source);
5. the field's default.

``config.loading.load_config`` merges them, validates once, and raises ``ConfigError``
listing every problem at once, each a ``where: what`` line (``agents[1].tier: unknown
tier 'fast'``), naming the variable or flag a bad value came from. A schema error does
not hide the rest: the parts that are wrong are set aside and the checks between settings
run on the others.
No other module reads ``OSTINATO_*`` variables; what they configure is passed down as
arguments from where the deployment is built (``deployment.py``, ``cli/serve.py``).
The provider SDKs' own variables (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``,
``OPENAI_BASE_URL`` ...) are theirs, read where the clients are made.

Adding a section (``[auth]``, ``[limits]`` ...):

1. Write a ``Section`` subclass, in ``config/sections.py`` or, for a big one, a module of
   its own in this package: one field per setting, each with a default and a
   ``description`` (the table's text). Give constraints (``ge=1``, ``Seconds``) so a bad
   value is refused here, once. ``json_schema_extra=short_env(...)`` only to keep an
   older variable working.
2. Add it to ``Config`` below: ``auth: AuthSection = Field(default_factory=AuthSection)``.
   The field's name is the table's (``[auth]``) and the variables' prefix
   (``OSTINATO_AUTH__``).
3. A check between settings (one naming another) goes in ``config/checks.py``.
4. Run ``python -m ostinato.config.table`` to regenerate the table in
   ``docs/configuration.md`` (a test fails while it is stale).
5. Read the values where the deployment is built and pass them down as arguments.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from ostinato.config.background import BackgroundSection
from ostinato.config.budgets import BudgetsSection
from ostinato.config.data import DataSection
from ostinato.config.observability import ObservabilitySection
from ostinato.config.requests import RequestsSection
from ostinato.config.sections import (
    AgentSection,
    ApprovalsSection,
    ClientSection,
    GuidelinesSection,
    MemorySection,
    ModelsSection,
    ServerSection,
)
from ostinato.config.tools import ToolsSection
from ostinato.identity.settings import AuthSettings

CONFIG_ENV = "OSTINATO_CONFIG"
DEFAULT_PATH = Path("ostinato.toml")
ENV_PREFIX = "OSTINATO_"
NESTED = "__"


class ConfigError(ValueError):
    """The configuration is invalid; ``problems`` are lines ``where: what``."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: " + "; ".join(problems))


class Config(BaseSettings):
    """Every setting. Build it with ``load_config``; ``Config(...)`` itself takes only
    the values it is given (no file, no environment), which is what tests want."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter=NESTED, extra="forbid", frozen=True
    )

    server: ServerSection = Field(default_factory=ServerSection)
    models: ModelsSection = Field(default_factory=ModelsSection)
    approvals: ApprovalsSection = Field(default_factory=ApprovalsSection)
    guidelines: GuidelinesSection = Field(default_factory=GuidelinesSection)
    memory: MemorySection = Field(default_factory=MemorySection)
    agents: list[AgentSection] = Field(default_factory=list)
    tools: ToolsSection = Field(default_factory=ToolsSection)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    client: ClientSection = Field(default_factory=ClientSection)
    observability: ObservabilitySection = Field(default_factory=ObservabilitySection)
    requests: RequestsSection = Field(default_factory=RequestsSection)
    background: BackgroundSection = Field(default_factory=BackgroundSection)
    budgets: BudgetsSection = Field(default_factory=BudgetsSection)
    data: DataSection = Field(default_factory=DataSection)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)  # the layers are merged by load_config

    def default_agent(self) -> AgentSection:
        for agent in self.agents:
            if agent.default:
                return agent
        return self.agents[0] if self.agents else AgentSection(id="assistant")
