"""Row decoding helpers: timestamps and the decoded-message cache."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from ostinato.store.sql.executor import dump_json
from ostinato.store.sql.rows import MessageCache, sqlite_time, time_from_sqlite


def test_sqlite_time_round_trips_as_utc() -> None:
    aware = datetime(2026, 3, 4, 5, 6, 7, 89, tzinfo=timezone(timedelta(hours=-5)))
    text = sqlite_time(aware)
    assert text == "2026-03-04 10:06:07.000089"
    assert time_from_sqlite(text) == aware and time_from_sqlite(text).tzinfo is UTC
    assert sqlite_time(datetime(2026, 1, 1)) == "2026-01-01 00:00:00.000000"
    assert time_from_sqlite("2026-01-01 00:00:00+01:00") == datetime(2025, 12, 31, 23, tzinfo=UTC)


def _row(mid: str, blocks: str) -> tuple[object, ...]:
    return (mid, "c", None, 1, "user", blocks, 0, "{}", "2026-01-01 00:00:00.000000", None)


def test_message_cache_decodes_a_row_once_and_drops_the_oldest() -> None:
    blocks = dump_json([{"type": "text", "text": "x" * 80}])
    cache = MessageCache(max_bytes=len(blocks) * 20)
    first = cache.messages([_row("a", blocks)], time_from_sqlite)[0]
    assert cache.messages([_row("a", blocks)], time_from_sqlite)[0] is first
    assert first.text == "x" * 80 and first.created_at is not None
    cache.messages([_row(f"m{i}", blocks) for i in range(20)], time_from_sqlite)
    assert cache.messages([_row("a", blocks)], time_from_sqlite)[0] is not first  # evicted


def test_message_cache_skips_rows_too_big_to_keep() -> None:
    cache = MessageCache(max_bytes=1600)
    huge = dump_json([{"type": "text", "text": "y" * 200}])
    one = cache.messages([_row("h", huge)], time_from_sqlite)[0]
    assert cache.messages([_row("h", huge)], time_from_sqlite)[0] is not one
