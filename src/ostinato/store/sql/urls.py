"""Which database a URL names, and how to show it without its password."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import sqlalchemy as sa

DEFAULT_SQLITE_FILE = "ostinato.db"
MEMORY_URL = "memory://"

_SQLITE_DRIVERS = {"sqlite", "sqlite+aiosqlite", "sqlite+pysqlite"}
_POSTGRES_DRIVERS = {"postgresql", "postgres", "postgresql+asyncpg", "postgres+asyncpg"}


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed store URL: the engine and where its data lives."""

    kind: Literal["memory", "sqlite", "postgresql"]
    sqlite_path: Path | None = None  # for "sqlite": an absolute file path
    url: sa.URL | None = None  # for "postgresql": a postgresql+asyncpg URL
    durability: Literal["acknowledged", "relaxed"] = "acknowledged"  # for "sqlite" (wal_sync)


def parse_url(url: str | None) -> Target:
    """Resolve a store URL; ``None`` is ``./ostinato.db``. Raises ``ValueError``."""
    if url is None:
        return Target("sqlite", sqlite_path=Path.cwd() / DEFAULT_SQLITE_FILE)
    if url.strip() in (MEMORY_URL, "memory:", "memory"):
        return Target("memory")
    import sqlalchemy as sa

    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise ValueError(f"not a database URL: {_mask(url)!r}") from exc
    driver = parsed.drivername
    if driver in _SQLITE_DRIVERS:
        database = parsed.database or ""
        if database in ("", ":memory:") or database.startswith("file:"):
            raise ValueError(
                "an in-memory or URI SQLite database cannot be shared by the writer and"
                f" reader connections; use a file path or {MEMORY_URL!r} ({_mask(url)!r})"
            )
        raw = parsed.query.get("durability", "acknowledged")
        if raw not in ("acknowledged", "relaxed"):
            raise ValueError(
                f"durability in a SQLite URL is 'acknowledged' or 'relaxed', not {raw!r}"
            )
        path = Path(database).expanduser().resolve()
        relaxed = raw == "relaxed"
        return Target(
            "sqlite", sqlite_path=path, durability="relaxed" if relaxed else "acknowledged"
        )
    if driver in _POSTGRES_DRIVERS:
        return Target("postgresql", url=parsed.set(drivername="postgresql+asyncpg"))
    raise ValueError(
        f"unsupported store URL {_mask(url)!r}: use {MEMORY_URL!r}, sqlite:///path/to/file.db"
        " or postgresql://user@host/db (SQLite via sqlite3, PostgreSQL via asyncpg)"
    )


def describe_url(url: str | None) -> str:
    """The database a URL names, fit to print: absolute SQLite path, password masked."""
    try:
        target = parse_url(url)
    except ValueError:
        return _mask(url or "")
    if target.kind == "memory":
        return "memory:// (in-process, not persisted)"
    if target.kind == "sqlite":
        return f"sqlite:///{target.sqlite_path}"
    assert target.url is not None
    return target.url.render_as_string(hide_password=True)


def _mask(url: str) -> str:
    """``url`` with any password replaced by ``***``, even if SQLAlchemy cannot parse it."""
    import sqlalchemy as sa

    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except Exception:
        scheme, sep, rest = url.partition("://")
        creds, at, host = rest.rpartition("@")
        if not sep or not at or ":" not in creds:
            return url
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}"
