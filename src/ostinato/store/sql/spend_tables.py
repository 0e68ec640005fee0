"""The spend tables (0015, ``store.spend``): declared in the store's one ``MetaData``
(``meta``) and re-exported by ``tables``."""

from __future__ import annotations

import sqlalchemy as sa

from ostinato.store.sql.meta import ID, TIME, metadata

# Spend (0015, ``store.spend``): per budget account (``pool``: an owner's own, the
# anonymous callers' shared one, the deployment's) and UTC day, the cost settled and the
# estimates reserved by calls under way; each call under way (its hold); and each owner's
# usage by day, model and agent. ``owner`` is ``""`` for the shared pools and for calls
# of no owner.
spend_days = sa.Table(
    "spend_days",
    metadata,
    sa.Column("pool", sa.String(16), primary_key=True),
    sa.Column("owner", sa.String(), primary_key=True),
    sa.Column("day", sa.String(10), primary_key=True),
    sa.Column("spent_usd", sa.Float, nullable=False),
    sa.Column("reserved_usd", sa.Float, nullable=False),
    sa.Index(None, "owner"),
)
spend_holds = sa.Table(
    "spend_holds",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("owner", sa.String(), nullable=False),
    sa.Column("day", sa.String(10), nullable=False),
    sa.Column("amount_usd", sa.Float, nullable=False),
    sa.Column("accounts", sa.Text, nullable=False),  # JSON: [[pool, owner], ...]
    sa.Column("model", sa.String(), nullable=False),
    sa.Column("agent", sa.String(), nullable=False),
    sa.Column("holder", sa.String(), nullable=True),  # a lease id (``servers.id``)
    sa.Column("created_at", TIME, nullable=False),
    # A turn's tab (0022): its calls counted while it runs, charged at its end. NULL
    # ``unit_usd``: no tab (one call's hold), charged at ``amount_usd`` if left.
    sa.Column("unit_usd", sa.Float, nullable=True),
    sa.Column("drawn_usd", sa.Float, nullable=False, server_default="0"),
    sa.Column("calls", sa.Integer, nullable=False, server_default="0"),
    sa.Column("tokens_in", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("tokens_out", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("cache_read_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("cache_write_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("cost_usd", sa.Float, nullable=False, server_default="0"),
    sa.Column("unpriced_calls", sa.Integer, nullable=False, server_default="0"),
    sa.Index(None, "owner"),
)
usage_days = sa.Table(
    "usage_days",
    metadata,
    sa.Column("owner", sa.String(), primary_key=True),
    sa.Column("day", sa.String(10), primary_key=True),
    sa.Column("model", sa.String(), primary_key=True),
    sa.Column("agent", sa.String(), primary_key=True),
    sa.Column("calls", sa.Integer, nullable=False),
    sa.Column("tokens_in", sa.BigInteger, nullable=False),
    sa.Column("tokens_out", sa.BigInteger, nullable=False),
    sa.Column("cache_read_tokens", sa.BigInteger, nullable=False),
    sa.Column("cache_write_tokens", sa.BigInteger, nullable=False),
    sa.Column("cost_usd", sa.Float, nullable=False),
    sa.Column("unpriced_calls", sa.Integer, nullable=False),
    sa.Index(None, "day"),
)
