"""Alembic environment: migrates the connection ostinato hands it.

ostinato runs migrations itself when a store opens (``ostinato.store.sql.migrate``),
passing an open SQLAlchemy ``Connection`` in ``config.attributes["connection"]``; no
``alembic.ini`` is needed. For development (``alembic revision --autogenerate``) a
``sqlalchemy.url`` in the Alembic config is used instead.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from ostinato.store.sql.tables import include_object, metadata


def _migrate(connection: sa.Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_object=include_object,
    )
    with context.begin_transaction():
        context.run_migrations()


def _run() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _migrate(connection)
        return
    url = context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no connection given and no sqlalchemy.url configured")
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        _migrate(conn)
    engine.dispose()


_run()
