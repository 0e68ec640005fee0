"""The ``MetaData`` every table of the store is declared in (``tables``, ``spend_tables``),
with its naming convention, and the column types they share."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

ID = sa.String()
TIME = sa.DateTime(timezone=True)
# A partial index of the rows that start a run (``store.tree``): ``messages``'s.
RUN_STARTS: dict[str, Any] = {
    f"{dialect}_where": sa.text("parent_seq IS NOT NULL") for dialect in ("sqlite", "postgresql")
}
