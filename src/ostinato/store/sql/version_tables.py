"""The agent-version tables (0017, ``store.versions``): declared in the store's one
``MetaData`` (``meta``) and re-exported by ``tables``."""

from __future__ import annotations

import sqlalchemy as sa

from ostinato.store.sql.meta import ID, TIME, metadata

agent_versions = sa.Table(
    "agent_versions",
    metadata,
    sa.Column("agent", sa.String(), primary_key=True),
    sa.Column("number", sa.Integer, primary_key=True),
    sa.Column("hash", sa.String(64), nullable=False),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("created_at", TIME, nullable=False),
)
conversation_agents = sa.Table(
    "conversation_agents",
    metadata,
    sa.Column("conversation_id", ID, primary_key=True),
    sa.Column("agent", sa.String(), primary_key=True),
    sa.Column("version", sa.Integer, nullable=True),
)
