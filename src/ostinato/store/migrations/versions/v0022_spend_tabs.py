"""A turn's model calls are counted on one row while it runs: its tab.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-04

Until now each call of a turn's own steps was charged to its accounts and its owner's
usage in the transaction of its reply's row: three upserts a step (two accounts and the
usage row). From here a turn keeps its calls on one ``spend_holds`` row, its **tab**:
each step adds its call's tokens and cost to the row (one upsert, with the reply's row),
and the turn's end charges the whole tab to the accounts and the usage at once. A turn
checked against a budget reserves for several calls at a time on the same row
(``amount_usd``), and draws each call's estimate from it (``drawn_usd``); a server that
dies leaves its tabs for recovery, which charges what they counted and, for a call that
may have been under way, ``unit_usd`` (the largest estimate the turn's calls had), at
most what was left of the reservation. A row without a tab (a side call's hold, or one
written by an earlier release) has ``unit_usd`` NULL and nothing counted: it is charged
at its amount, as before. Every new column has a default, so an earlier release still
writes its holds here.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision: str | None = "0021"
branch_labels: str | None = None
depends_on: str | None = None

_COUNTS = (
    ("drawn_usd", sa.Float()),
    ("calls", sa.Integer()),
    ("tokens_in", sa.BigInteger()),
    ("tokens_out", sa.BigInteger()),
    ("cache_read_tokens", sa.BigInteger()),
    ("cache_write_tokens", sa.BigInteger()),
    ("cost_usd", sa.Float()),
    ("unpriced_calls", sa.Integer()),
)


def upgrade() -> None:
    with op.batch_alter_table("spend_holds") as batch:
        batch.add_column(sa.Column("unit_usd", sa.Float(), nullable=True))
        for name, kind in _COUNTS:
            batch.add_column(sa.Column(name, kind, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("spend_holds") as batch:
        for name, _ in reversed(_COUNTS):
            batch.drop_column(name)
        batch.drop_column("unit_usd")
