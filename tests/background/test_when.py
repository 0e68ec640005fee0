"""``background.when``: each kind of ``when``, time zones and daylight-saving changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ostinato.background.when import next_fire, parse_when, zone_named
from ostinato.errors import InvalidRequest

NOW = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)  # Saturday; Paris springs forward on the 29th
PARIS = "Europe/Paris"


def test_in_and_iso_are_one_shot() -> None:
    later = parse_when("in 20 minutes", NOW)
    assert (later.kind, later.first) == ("once", NOW + timedelta(minutes=20))
    assert parse_when("in 2h", NOW).first == NOW + timedelta(hours=2)
    at = parse_when("2026-12-24T09:00", NOW, PARIS)  # a wall time in the zone it was set in
    assert at.kind == "once" and at.first == datetime(2026, 12, 24, 8, 0, tzinfo=UTC)
    assert parse_when("2026-12-24T09:00+00:00", NOW, PARIS).first.hour == 9


def test_every_is_elapsed_time() -> None:
    every = parse_when("every 15m", NOW)
    assert (every.kind, every.spec, every.first) == ("every", "900s", NOW + timedelta(minutes=15))
    assert next_fire("every", "7200s", NOW, zone_named(None)) == NOW + timedelta(hours=2)


def test_daily_keeps_the_wall_clock_across_spring_forward() -> None:
    daily = parse_when("daily at 09:00", NOW, PARIS)
    assert daily.first == datetime(2026, 3, 29, 7, 0, tzinfo=UTC)  # 09:00 CEST, the new offset
    before = parse_when("daily at 09:00", NOW - timedelta(days=1), PARIS)
    assert before.first == datetime(2026, 3, 28, 8, 0, tzinfo=UTC)  # 09:00 CET
    assert next_fire("daily", "09:00", before.first, zone_named(PARIS)) == daily.first


def test_a_wall_time_in_the_gap_fires_after_the_jump_and_a_doubled_one_once() -> None:
    paris = zone_named(PARIS)
    gap = next_fire("daily", "02:30", NOW, paris)  # 02:30 does not exist on the 29th
    assert gap == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)  # 03:30 CEST
    assert gap.astimezone(paris).strftime("%H:%M") == "03:30"
    autumn = datetime(2026, 10, 24, 12, 0, tzinfo=UTC)  # Paris falls back on the 25th
    first = next_fire("daily", "02:30", autumn, paris)
    assert first == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # the first 02:30 (CEST)
    after = next_fire("daily", "02:30", first, paris)
    assert after == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)  # not the second 02:30 too


def test_cron_in_the_zone_it_was_set_in() -> None:
    cron = parse_when("cron 0 9 * * 1-5", NOW, PARIS)  # weekdays at nine
    assert cron.kind == "cron" and cron.spec == "0 9 * * 1-5"
    assert cron.first == datetime(2026, 3, 30, 7, 0, tzinfo=UTC)  # Monday, 09:00 CEST
    assert parse_when("*/10 * * * *", NOW).first == NOW + timedelta(minutes=10)


@pytest.mark.parametrize(
    ("when", "says"),
    [
        ("tomorrowish", "is not a time"),
        ("in 5 fortnights", "is not a duration"),
        ("every 10s", "at most once a minute"),
        ("daily at 25:00", "is not a time of day"),
        ("cron 61 * * * *", "is not a cron expression"),
        ("2020-01-01T00:00", "in the past"),
        ("in 3000 days", "at most five years ahead"),
    ],
)
def test_what_is_refused_says_why(when: str, says: str) -> None:
    with pytest.raises(InvalidRequest, match=says):
        parse_when(when, NOW)


def test_an_unknown_zone_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="not a time zone"):
        parse_when("daily at 09:00", NOW, "Mars/Olympus")
