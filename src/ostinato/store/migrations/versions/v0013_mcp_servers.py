"""Per-person MCP servers: the streamable-HTTP servers a person connected.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01

``mcp_servers``: keyed by owner and name; the URL, the credentials only encrypted
(``secret``, a Fernet token; null for none), every tool's risk if the person set one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision: str | None = "0012"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_servers",
        sa.Column("owner", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("secret", sa.Text(), nullable=True),
        sa.Column("risk", sa.String(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("owner", "name", name="pk_mcp_servers"),
    )


def downgrade() -> None:
    op.drop_table("mcp_servers")
