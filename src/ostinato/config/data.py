"""The ``[data]`` section: what ostinato does with the conversations it keeps (titles,
retention)."""

from __future__ import annotations

from pydantic import Field

from ostinato.config.sections import Section


class DataSection(Section):
    titles: str = Field(
        default="conversation",
        description="Who titles a conversation after its first answer: `conversation` "
        "(the model that answered it), a tier or `provider:model` id (a small one), or "
        "`off` (its first words). A conversation that has a title keeps it.",
    )
    retention_days: int = Field(
        default=0,
        ge=0,
        description="Delete conversations idle (no new row, no change) longer than this "
        "many days, once a day, on one server of those sharing the database "
        "(docs/data.md, Retention). 0: keep them.",
    )
