"""``ostinato migrate``: bring the database to the schema this version needs, and exit.

``serve`` migrates on start as well; this command is for a deployment that migrates once,
before a rollout (the Kubernetes Job in ``deploy/kubernetes/migrate-job.yaml``), so that
no server of the new version starts against an old schema and no two race to upgrade it.
"""

from __future__ import annotations

import sys

from ostinato.config import ConfigError, load_config


async def migrate(config_path: str | None, database_url: str | None) -> int:
    """Open the store the settings name (which migrates it) and close it again."""
    from ostinato.store import open_store
    from ostinato.store.sql.migrate import HEAD_REVISION
    from ostinato.store.sql.urls import parse_url

    try:
        config = load_config(config_path)[0]
    except ConfigError as exc:
        print(f"ostinato migrate: {exc}", file=sys.stderr)
        return 2
    url = database_url or config.server.database_url
    try:
        target = parse_url(url)
    except ValueError as exc:
        print(f"ostinato migrate: {exc}", file=sys.stderr)
        return 2
    if target.kind == "memory":
        print("ostinato migrate: memory:// keeps nothing; there is nothing to migrate")
        return 0
    try:
        store = await open_store(url)
    except Exception as exc:
        print(f"ostinato migrate: the database could not be migrated: {exc}", file=sys.stderr)
        return 1
    await store.close()
    print(f"ostinato migrate: the {target.kind} database is at revision {HEAD_REVISION}")
    return 0
