"""Alembic migrations of the SQL store (``ostinato.store.sql.migrate`` runs them)."""
